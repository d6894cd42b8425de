"""``snapshot.yml``'s foreign-agent fields: which ACP agent a scenario runs instead of ours.

``agent:`` is the command (an argv list) that starts another ACP agent; ``agent_base_url_env``
names the environment variable through which it takes its model base URL (the gate points it
at a ``dsh-llm-proxy``); ``agent_env`` sets fixed variables it needs (a placeholder key its SDK
insists on). Two placeholders are expanded in the command: ``{python}`` (the interpreter running
the gate) and ``{scenario}`` (the scenario folder); any other ``{…}`` is refused.

These are only the field types and their checks; running such an agent is
:mod:`dsh_snapshot._foreign`.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

__all__ = [
    "DEFAULT_BASE_URL_ENV",
    "PLACEHOLDERS",
    "AgentArgv",
    "EnvName",
    "check_agent_env",
]

DEFAULT_BASE_URL_ENV = "OPENAI_BASE_URL"
PLACEHOLDERS = ("{python}", "{scenario}")
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def _check_argument(value: str) -> str:
    if "\x00" in value:
        raise ValueError("a command argument must not contain a NUL byte")
    unknown = [p for p in _PLACEHOLDER.findall(value) if p not in PLACEHOLDERS]
    if unknown:
        raise ValueError(
            f"unknown placeholder {unknown[0]} in {value!r}: only {' and '.join(PLACEHOLDERS)} "
            "are expanded"
        )
    return value


def _check_argv(value: list[str]) -> list[str]:
    if not value[0].strip():
        raise ValueError("the command's first item (the program) must not be blank")
    return value


AgentArgument = Annotated[str, Field(min_length=1), AfterValidator(_check_argument)]
AgentArgv = Annotated[list[AgentArgument], Field(min_length=1), AfterValidator(_check_argv)]
"""The command that starts a foreign ACP agent: a non-empty list of non-empty strings."""

EnvName = Annotated[str, Field(pattern=_ENV_NAME, max_length=128)]
"""An environment variable name (letters, digits, ``_``; not starting with a digit)."""


def check_agent_env(base_url_env: str, env: dict[str, str]) -> None:
    """``agent_env`` must not set the variable the gate points at the proxy.

    Raises:
        ValueError: it does.
    """
    if base_url_env in env:
        raise ValueError(
            f"agent_env sets {base_url_env}, the variable the gate points at the proxy "
            "(agent_base_url_env): remove it"
        )

"""``snapshot.yml``'s foreign-agent fields: which ACP agent a scenario runs instead of ours.

``agent:`` is the command (an argv list) that starts another ACP agent; ``agent_base_url_env``
names the environment variable through which it takes its model base URL (the gate points it
at a ``dsh-llm-proxy``); ``agent_env`` sets fixed variables it needs (a placeholder key its SDK
insists on). Two placeholders are expanded in the command: ``{python}`` (the interpreter running
the gate) and ``{scenario}`` (the scenario folder); any other ``{…}`` is refused. In
``agent_env``'s values ``{base_url}`` becomes the proxy's base URL (for an agent whose endpoint
sits inside a larger setting, such as a JSON list of providers).

These are only the field types and their checks; running such an agent is
:mod:`dsh_snapshot._foreign`.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

__all__ = [
    "BASE_URL",
    "DEFAULT_BASE_URL_ENV",
    "PLACEHOLDERS",
    "AgentArgv",
    "EnvName",
    "check_agent_env",
    "check_base_url_env",
    "refused_env_name",
]

DEFAULT_BASE_URL_ENV = "OPENAI_BASE_URL"
BASE_URL = "{base_url}"
"""Replaced by the proxy's base URL in ``agent_env``'s values."""
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


# Variables that make a loader, an interpreter, a shell or git run code or read files the
# scenario chose before (or instead of) the agent itself, or that route its traffic: a
# scenario's agent_env may set none of them. The sandbox sets PATH, HOME and the temp dirs.
_REFUSED_PREFIXES = ("LD_", "DYLD_", "PYTHON", "NODE_", "NPM_CONFIG_", "GIT_", "PERL", "RUBY",
                     "JAVA_", "_JAVA_", "JDK_", "MALLOC_", "GCONV_", "BASH_FUNC_")  # fmt: skip
_REFUSED_NAMES = frozenset({
    "BASH_ENV", "ENV", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "PS4", "IFS", "CDPATH",
    "CLASSPATH", "NLSPATH", "LOCPATH", "HOSTALIASES", "RESOLV_HOST_CONF", "TZDIR",
    "PATH", "HOME", "TMPDIR", "TMP", "TEMP", "SHELL", "EDITOR", "VISUAL", "PAGER",
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "XDG_CONFIG_HOME",
    "XDG_DATA_HOME", "XDG_RUNTIME_DIR",
})  # fmt: skip
# Harmless switches a Python agent may want.
_ALLOWED_PYTHON = frozenset({"PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8",
                             "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED"})  # fmt: skip


def refused_env_name(name: str) -> bool:
    """Whether a scenario may not set ``name`` for its agent (a start-up hook, a loader or
    interpreter path, a proxy, or what the sandbox itself sets); any case."""
    upper = name.upper()
    if upper in _ALLOWED_PYTHON:
        return False
    return upper in _REFUSED_NAMES or upper.startswith(_REFUSED_PREFIXES)


_BASE_URL_SHAPE = ("URL", "BASE", "ENDPOINT", "HOST")


def check_base_url_env(name: str) -> str:
    """The variable the gate points at the proxy must look like one that holds a URL, and
    must not be one that loads or runs code: the gate sets it to the proxy's URL, and in
    ``PATH`` or ``LD_LIBRARY_PATH`` that URL's first part (``http``) is a folder relative to the
    run's cwd, where the scenario's workspace lies.

    Raises:
        ValueError: it is not (naming it).
    """
    if refused_env_name(name) or not any(part in name.upper() for part in _BASE_URL_SHAPE):
        raise ValueError(
            f"agent_base_url_env {name!r} is not a base-URL variable: it must name one that "
            "holds a URL (its name contains URL, BASE, ENDPOINT or HOST, e.g. "
            "OPENAI_BASE_URL) and no loader, interpreter, shell or path variable"
        )
    return name


def check_agent_env(base_url_env: str, env: dict[str, str]) -> None:
    """``agent_env`` must not set the variable the gate points at the proxy, nor any variable
    that runs or loads code before the agent does (:func:`refused_env_name`).

    Raises:
        ValueError: it does (naming the variable).
    """
    if base_url_env in env:
        raise ValueError(
            f"agent_env sets {base_url_env}, the variable the gate points at the proxy "
            "(agent_base_url_env): remove it"
        )
    for name in env:
        if refused_env_name(name):
            raise ValueError(
                f"agent_env sets {name}: a scenario may not set loader, interpreter, shell or "
                "git start-up hooks, proxies, PATH, HOME or temp dirs for its agent (SECURITY.md)"
            )

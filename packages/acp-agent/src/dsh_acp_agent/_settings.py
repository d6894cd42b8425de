"""The agent process's settings, read from ``DSH_*`` environment variables."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dsh_core import DEFAULT_LOOP_PROFILE, DEFAULT_MAX_PARALLEL_TOOL_CALLS, LoopProfile
from dsh_core.plugins import (
    DEFAULT_MODEL_PROVIDER,
    DEFAULT_STORE_BACKEND,
    MODEL_GROUP,
    STORE_GROUP,
    UnknownPluginError,
    model_provider_names,
    store_backend_names,
)

__all__ = ["AgentSettings", "SettingsError", "describe_validation_error", "load_settings"]


def _default_sessions_root() -> Path:
    return Path("~/.local/share/dsh/sessions").expanduser()


class AgentSettings(BaseSettings):
    """What ``dsh-acp-agent`` reads from the environment (each field is ``DSH_<FIELD>``).

    Attributes:
        sessions_root: directory holding the session logs (``DSH_SESSIONS_ROOT``).
        store: the store backend, by its ``dsh.stores`` entry point name: ``jsonl``
            (one file per session in the root), ``sqlite`` (one database in the root) or any
            installed plugin's (``DSH_STORE``; ``DSH_PERSISTENCE``, its old name, is read when
            ``DSH_STORE`` is unset, with a deprecation warning, until 0.3.0).
        model_client: the model provider, by its ``dsh.models`` entry point name:
            ``deepseek`` (live API), ``replay`` (recorded scripts) or any installed plugin's
            (``DSH_MODEL_CLIENT``).
        loop_profile: ``june`` or ``current``, which era of upstream's agent loop to
            reproduce (``DSH_LOOP_PROFILE``; see ``dsh_core.LoopProfile``).
        max_delegation_depth: deepest child a subagent tool may create; unset takes the
            profile's (june 1, current 3) (``DSH_MAX_DELEGATION_DEPTH``).
        max_parallel_tool_calls: parallel-safe tool calls in flight at once under the
            ``current`` profile (``DSH_MAX_PARALLEL_TOOL_CALLS``).
        max_steps: model calls allowed in one turn (``DSH_MAX_STEPS``).
        bash_timeout: seconds a bash command may run; unset keeps the tool's default
            (``DSH_BASH_TIMEOUT``).
        system_prompt_file: a UTF-8 file whose text replaces the built-in system prompt
            (``DSH_SYSTEM_PROMPT_FILE``).
    """

    model_config = SettingsConfigDict(env_prefix="DSH_", extra="ignore", frozen=True)

    sessions_root: Path = Field(default_factory=_default_sessions_root)
    store: str = DEFAULT_STORE_BACKEND
    model_client: str = DEFAULT_MODEL_PROVIDER
    loop_profile: LoopProfile = DEFAULT_LOOP_PROFILE
    max_delegation_depth: int | None = Field(default=None, ge=0, le=2**53 - 1)
    max_parallel_tool_calls: int = Field(default=DEFAULT_MAX_PARALLEL_TOOL_CALLS, ge=1)
    max_steps: int = Field(default=50, ge=1)
    bash_timeout: float | None = Field(default=None, gt=0)

    @field_validator("store", "model_client")
    @classmethod
    def _installed_plugin(cls, name: str, info: ValidationInfo) -> str:
        group = STORE_GROUP if info.field_name == "store" else MODEL_GROUP
        known = store_backend_names() if group == STORE_GROUP else model_provider_names()
        if name not in known:
            raise ValueError(str(UnknownPluginError(group, name, known)))
        return name

    system_prompt_file: Path | None = None


class SettingsError(Exception):
    """A setting has an invalid value; the message is one line naming the variable."""


def describe_validation_error(exc: ValidationError, env_prefix: str) -> str:
    """One line naming the first offending environment variable and why it is wrong.

    Args:
        exc: the error pydantic-settings raised while reading the environment.
        env_prefix: the settings class's ``env_prefix`` (``"DSH_"``, ``"OPENAI_"``…).

    Returns:
        ``"invalid DSH_MAX_STEPS='0': Input should be greater than or equal to 1"`` style text.
    """
    errors = exc.errors()
    if not errors:
        return str(exc).splitlines()[0]
    first = errors[0]
    loc = first.get("loc", ())
    field = str(loc[0]) if loc else "?"
    variable = f"{env_prefix}{field}".upper()
    given: Any = first.get("input")
    if first.get("type") == "missing":
        return f"missing {variable}: {first.get('msg', 'required')}"
    shown = "" if isinstance(given, dict) else f"={given!r}"
    return f"invalid {variable}{shown}: {first.get('msg', 'invalid value')}"


_STORE_ENV = "DSH_STORE"
_OLD_STORE_ENV = "DSH_PERSISTENCE"  # one concept, one word: "store" (issue 21)


def load_settings() -> AgentSettings:
    """Read :class:`AgentSettings` from the environment.

    Raises:
        SettingsError: a variable has an invalid value (the message names it).
    """
    old = os.environ.get(_OLD_STORE_ENV)
    chosen: dict[str, Any] = {}
    if old is not None and _STORE_ENV not in os.environ:
        warnings.warn(
            f"{_OLD_STORE_ENV} is deprecated, use {_STORE_ENV} (removal in 0.3.0)",
            DeprecationWarning,
            stacklevel=2,
        )
        chosen["store"] = old
    try:
        return AgentSettings(**chosen)
    except ValidationError as exc:
        raise SettingsError(describe_validation_error(exc, "DSH_")) from exc

"""Replay settings: the one hand-off from the process that starts a replaying agent to it.

The snapshot runner builds a :class:`ReplaySettings`, passes it on with :meth:`~ReplaySettings.
to_env`, and the agent reads it back with ``ReplaySettings()``; no other code names the
variables.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["ReplaySettings"]


class ReplaySettings(BaseSettings):
    """Where the recording is and how to replay it.

    Attributes:
        snapshot_file: ``DSH_SNAPSHOT_FILE``, the primary ``session.jsonl`` (required).
        snapshot_override: ``DSH_SNAPSHOT_OVERRIDE``, the primary's ``replay.override.json``.
        child_files: ``DSH_SNAPSHOT_CHILD_FILES``, the children's logs joined with
            ``os.pathsep`` (any order; they are sorted by ``(createdAt, id, file name)``).
        seed_slice: ``DSH_REPLAY_SEED_SLICE`` (default true). False derives each child from
            its whole log, seeded prefix included: the upstream bug, kept only so the
            red-to-green proof can show the fork scenarios fail without the slice.
        report: ``DSH_REPLAY_REPORT``, where the agent writes the replay report at exit.
        child_jitter_ms: ``DSH_REPLAY_CHILD_JITTER_MS`` (default 0), test-only: each call of
            a delegated child first sleeps a random 0..N ms, so the determinism test can
            shuffle the order in which concurrent children reach the model.
        check_headers: ``DSH_REPLAY_CHECK_HEADERS`` (default true): compare each live
            request's header with the recorded one (request drift); ``refresh`` and
            ``record`` set it false, since they accept the new header.
    """

    model_config = SettingsConfigDict(
        env_ignore_empty=True, extra="ignore", populate_by_name=True, frozen=True
    )

    snapshot_file: Path = Field(validation_alias="DSH_SNAPSHOT_FILE")
    snapshot_override: Path | None = Field(default=None, validation_alias="DSH_SNAPSHOT_OVERRIDE")
    child_files: Annotated[tuple[Path, ...], NoDecode] = Field(
        default=(), validation_alias="DSH_SNAPSHOT_CHILD_FILES"
    )
    seed_slice: bool = Field(default=True, validation_alias="DSH_REPLAY_SEED_SLICE")
    report: Path | None = Field(default=None, validation_alias="DSH_REPLAY_REPORT")
    child_jitter_ms: int = Field(default=0, ge=0, validation_alias="DSH_REPLAY_CHILD_JITTER_MS")
    check_headers: bool = Field(default=True, validation_alias="DSH_REPLAY_CHECK_HEADERS")

    def to_env(self) -> dict[str, str]:
        """The environment variables from which ``ReplaySettings()`` in another process reads
        back settings equal to these (unset optional fields are left out)."""
        env: dict[str, str] = {}
        for name, info in type(self).model_fields.items():
            value: Any = getattr(self, name)
            text = _env_text(value)
            if text:
                assert isinstance(info.validation_alias, str)  # every field names its variable
                env[info.validation_alias] = text
        return env

    @field_validator("child_files", mode="before")
    @classmethod
    def _split_child_files(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(Path(part) for part in value.split(os.pathsep) if part)
        return value


def _env_text(value: Any) -> str:
    """``value`` as its environment text; empty for ``None`` and an empty tuple."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return os.pathsep.join(str(part) for part in value)  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    return str(value)

"""The one settings object of a snapshot run, whichever front end (CLI, pytest plugin, compat)
builds it."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from dsh_core import LoopProfile
from dsh_core.plugins import default_store_backend_names
from dsh_snapshot._compat import Allowances
from dsh_snapshot._foreign import ForeignAgent

__all__ = ["Check", "Mode", "SnapshotSettings"]

Mode = Literal["replay", "refresh", "record", "record-scripted", "record-accept"]
Check = Literal["fixtures", "messages"]


def _installed() -> tuple[str, ...]:
    """Every installed embedded store backend (a server store runs only when asked for), the
    default one first (the one outputs are written from)."""
    return tuple(default_store_backend_names())


class SnapshotSettings(BaseModel):
    """What to run and how: the input of :func:`dsh_snapshot.run`.

    Attributes:
        paths: scenario folders, files inside one, or folders holding them.
        names: ``-k``: only scenarios whose ``profile/name`` contains one of these,
            case-insensitive (empty: all).
        mode: ``replay`` (compare only), ``refresh`` (replay, rewrite outputs), ``record``
            (live API, rewrite outputs), ``record-scripted`` (scripted model server) or
            ``record-accept`` (a foreign agent's new requests with its recorded answers).
        stores: the store backends (``dsh.stores`` plugin names) each scenario runs
            with, unless its ``snapshot.yml`` pins one; default: every installed embedded
            backend (``dsh_core.plugins.default_store_backend_names``). The
            writing modes run the first only (outputs are written once).
        jobs: runs at a time.
        cold: start every agent as a fresh interpreter instead of forking it from a warm,
            pre-imported one per worker (:class:`dsh_snapshot.WarmAgents`).
        timeout: seconds any single wait for the agent may take.
        run_timeout: seconds one scenario run may take in all (an agent that speaks just
            often enough never trips ``timeout``); ``None``: three times ``timeout``.
        loop: the agent loop profile to run every scenario with; ``None`` takes each
            scenario's own (``snapshot.yml``, or an upstream folder's detected era).
        check: in ``replay``, ``fixtures`` compares every log and stdout frame; ``messages``
            compares only what a client saw per prompt (agent message text and stop reason),
            for recordings made by an agent with features this one lacks.
        allowances: deliberate differences from the fixtures to forgive; ``None`` means none
            for our scenarios and ``UPSTREAM_ALLOWANCES`` for upstream folders (no
            ``snapshot.yml``), as COMPATIBILITY.md lists them.
        seed_slice: ``False`` turns the replay client's seedLength slice off (the proof only).
        api_key: the live key (``record`` only); never printed.
        child_jitter_ms: test-only, replay: each subagent child's model call first sleeps a
            random 0..N ms, to shuffle concurrent children.
        retries: ``record``: how many more times a live recording that misses its
            ``expect:`` is made before the scenario fails.
        agent_env: extra ``DSH_*`` / provider settings for the agent, e.g. another
            ``DSH_SYSTEM_PROMPT_FILE`` or ``OPENAI_MODEL`` (the caller's own environment
            never reaches it).
        agent: run this ACP agent instead of ours, its model calls through ``dsh-llm-proxy``
            (``--agent``); ``None`` means each scenario's ``agent:``, if any
            (:mod:`dsh_snapshot._foreign`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    paths: tuple[Path, ...] = ()
    names: tuple[str, ...] = ()
    mode: Mode = "replay"
    stores: tuple[str, ...] = Field(default_factory=_installed, min_length=1)
    jobs: int = Field(default=1, ge=1)
    cold: bool = False
    timeout: float = Field(default=60.0, gt=0)
    run_timeout: float | None = Field(default=None, gt=0)
    loop: LoopProfile | None = None
    check: Check = "fixtures"
    allowances: Allowances | None = None
    seed_slice: bool = True
    api_key: SecretStr | None = None
    child_jitter_ms: int = Field(default=0, ge=0)
    retries: int = Field(default=0, ge=0)
    agent_env: tuple[tuple[str, str], ...] = ()
    agent: ForeignAgent | None = None

    @property
    def replaying(self) -> bool:
        """Whether the model answers from the committed recordings (``replay``, ``refresh``)."""
        return self.mode in ("replay", "refresh")

    @model_validator(mode="before")
    @classmethod
    def _old_stores_name(cls, data: Any) -> Any:
        # One concept, one word: ``persistences`` is read until 0.3.0, with a warning.
        if isinstance(data, dict) and "persistences" in data:
            warnings.warn(
                "SnapshotSettings(persistences=…) is deprecated, use stores=… (removal in 0.3.0)",
                DeprecationWarning,
                stacklevel=2,
            )
            raw = cast(dict[str, Any], data)
            fixed = {k: v for k, v in raw.items() if k != "persistences"}
            fixed.setdefault("stores", raw["persistences"])
            return fixed
        return cast(Any, data)

    @property
    def persistences(self) -> tuple[str, ...]:
        """Deprecated name of ``stores`` (removal in 0.3.0)."""
        warnings.warn(
            "SnapshotSettings.persistences is deprecated, use .stores (removal in 0.3.0)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.stores

    @property
    def run_stores(self) -> tuple[str, ...]:
        """The backends to run: all in ``replay``; only the first where outputs are written."""
        return self.stores if self.mode == "replay" else self.stores[:1]

    @property
    def run_budget(self) -> float:
        """Seconds one scenario run may take in all (``run_timeout``, else 3 x ``timeout``)."""
        return self.run_timeout if self.run_timeout is not None else 3 * self.timeout

    @property
    def key(self) -> str | None:
        """The live key's value (``record`` only), or ``None``."""
        return self.api_key.get_secret_value() if self.api_key is not None else None

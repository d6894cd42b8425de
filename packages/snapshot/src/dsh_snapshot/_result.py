"""What one scenario run found: :class:`ScenarioResult`, and the one verdict every front end
shows."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

from dsh_core.plugins import DEFAULT_STORE_BACKEND
from dsh_snapshot._diff import Difference
from dsh_snapshot._provenance import Usage
from dsh_snapshot._scenario import Scenario
from dsh_snapshot._settings import Mode, SnapshotSettings

__all__ = ["ScenarioResult", "Verdict"]

Verdict = Literal["pass", "fail", "needs"]


@dataclass(slots=True)
class ScenarioResult:
    """What one run found."""

    scenario: Scenario
    settings: SnapshotSettings
    store: str = DEFAULT_STORE_BACKEND
    ok: bool = False
    failures: list[str] = field(default_factory=list[str])
    differences: list[Difference] = field(default_factory=list[Difference])
    sessions: int = 0
    calls_replayed: int = 0
    seconds: float = 0.0
    written: list[str] = field(default_factory=list[str])
    logs: list[list[Any]] = field(default_factory=list[list[Any]])
    frames: list[Any] = field(default_factory=list[Any])
    needs: list[str] = field(default_factory=list[str])
    usage: Usage = field(default_factory=Usage)
    missed: list[str] = field(default_factory=list[str])
    attempts: int = 1
    header_note: str = ""
    accepted: list[str] = field(default_factory=list[str])
    """``record-accept``: the request changes that kept their recorded answers."""
    drift: list[str] = field(default_factory=list[str])
    """Replay: the requests that differed from the recorded ones (a keyless accept of them
    keeps the recorded answers)."""

    @property
    def persistence(self) -> str:
        """Deprecated name of ``store`` (removal in 0.3.0)."""
        warnings.warn(
            "ScenarioResult.persistence is deprecated, use .store (removal in 0.3.0)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.store

    @property
    def mode(self) -> Mode:
        """The mode the scenario ran in."""
        return self.settings.mode

    @property
    def calls(self) -> int:
        """Model calls of the run: replayed ones, else those the harvested logs record."""
        return self.calls_replayed or self.usage.calls

    @property
    def verdict(self) -> Verdict:
        """The one verdict every front end shows (CLI, pytest plugin, compat): ``pass`` only
        when the run went through with no failure; ``needs`` (we lack an op, tool or feature,
        so it was not run) is never a pass, wherever it comes from."""
        if self.needs:
            return "needs"
        return "pass" if self.ok and not self.failures else "fail"

    @property
    def summary(self) -> str:
        """The first failure, or ``"ok"``."""
        return self.failures[0] if self.failures else "ok"

"""The file layout of a scenario folder: every fixture name, spelled here and nowhere else.

A scenario folder (DESIGN.md, "Scenario folders") holds ``input.json``, ours a ``snapshot.yml``,
the recorded ``session.jsonl`` and its children ``session.1.jsonl`` …, the expected stdout
(``stdout.expected.jsonl``, upstream's June harness ``stdout.golden.jsonl``), and optionally
``model.script.json`` (the scripted model's answers) and ``replay.override.json``. The snapshot
runner, the scripted model server and the proxy read the same folders, so the names live in
core, once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

__all__ = ["ScenarioFiles"]

# Any digits: a stray session.0.jsonl or session.01.jsonl is a child number the scenario
# loader refuses (1..N without gaps), never a file silently ignored.
_CHILD_RE = re.compile(r"^session\.([0-9]+)\.jsonl$")


@dataclass(frozen=True, slots=True)
class ScenarioFiles:
    """The files of one scenario folder (the names are class attributes, usable without one).

    Attributes:
        folder: the scenario folder.
    """

    INPUT: ClassVar[str] = "input.json"
    META: ClassVar[str] = "snapshot.yml"
    SCRIPT: ClassVar[str] = "model.script.json"
    OVERRIDE: ClassVar[str] = "replay.override.json"
    PRIMARY: ClassVar[str] = "session.jsonl"
    CHILD_GLOB: ClassVar[str] = "session.*.jsonl"
    """Every child log (``session.1.jsonl`` …), as a glob."""
    SESSION_GLOB: ClassVar[str] = "session*.jsonl"
    """The primary log and every child's, as a glob."""
    STDOUT: ClassVar[str] = "stdout.expected.jsonl"
    UPSTREAM_STDOUT: ClassVar[str] = "stdout.golden.jsonl"
    """The June upstream harness's name for the expected stdout."""
    STDOUT_NAMES: ClassVar[tuple[str, ...]] = (STDOUT, UPSTREAM_STDOUT)
    """The expected stdout's names, in the order a folder's is looked for."""
    PENDING: ClassVar[str] = ".pending"
    """Where a failing replay keeps its actual outputs, inside the scenario (git ignores it)."""

    folder: Path

    @staticmethod
    def session_name(index: int) -> str:
        """``session.jsonl`` for 0 (the primary), ``session.N.jsonl`` for child N.

        Raises:
            ValueError: ``index`` is negative.
        """
        if index < 0:
            raise ValueError(f"a session index is 0 (primary) or a child number, not {index}")
        return ScenarioFiles.PRIMARY if index == 0 else f"session.{index}.jsonl"

    @staticmethod
    def session_index(name: str) -> int | None:
        """The inverse of :meth:`session_name`: 0, N, or ``None`` for any other name."""
        if name == ScenarioFiles.PRIMARY:
            return 0
        match = _CHILD_RE.match(name)
        return int(match.group(1)) if match else None

    @property
    def input(self) -> Path:
        """``input.json``: the steps."""
        return self.folder / self.INPUT

    @property
    def meta(self) -> Path:
        """``snapshot.yml`` (a scenario of ours)."""
        return self.folder / self.META

    @property
    def script(self) -> Path:
        """``model.script.json``: the scripted model server's script."""
        return self.folder / self.SCRIPT

    @property
    def override(self) -> Path:
        """``replay.override.json``."""
        return self.folder / self.OVERRIDE

    @property
    def pending(self) -> Path:
        """``.pending/``: a failing replay's outputs."""
        return self.folder / self.PENDING

    def session(self, index: int) -> Path:
        """The primary log (0) or child ``index``'s."""
        return self.folder / self.session_name(index)

    def child_numbers(self) -> list[int]:
        """The numbers of the ``session.N.jsonl`` files present, ascending."""
        found = (_CHILD_RE.match(entry.name) for entry in self.folder.iterdir())
        return sorted(int(match.group(1)) for match in found if match)

    def stdout(self) -> Path:
        """The expected stdout present (ours first), else where ours would be written."""
        for name in self.STDOUT_NAMES:
            if (self.folder / name).is_file():
                return self.folder / name
        return self.folder / self.STDOUT

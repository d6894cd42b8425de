"""What the gate says about request drift: the failure first, and which runs were checked.

The replay client does the comparison (``dsh_llm_replay``); this module only reports it: a
``request-drift`` error of the replay report becomes the run's leading failure, and each run
notes whether its recording has a request header to check (June-era and upstream-normalised
recordings do not, and the gate says so rather than passing them silently as checked).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from dsh_core import DshError, read_log_bytes
from dsh_llm_replay import RecordedHeaders, ReplayReport, RequestDriftError, recorded_headers
from dsh_snapshot._fsafe import read_file
from dsh_snapshot._harvest import FileCache

__all__ = ["drift_after_stop", "drift_failures", "header_note", "header_summary", "only_drift"]

_NOTE_PREFIX = "request header: "


def drift_after_stop(finish: Callable[[], object], report: Path) -> list[str]:
    """The drift failures of a replay whose step failed: ``finish`` lets the agent exit (it
    writes its replay report then), and the report says whether a request drifted first.
    Nothing when it cannot tell (the agent did not exit cleanly, no report)."""
    with contextlib.suppress(DshError, OSError):
        finish()
    try:
        return drift_failures(ReplayReport.read(report))
    except (DshError, OSError):
        return []


def only_drift(report: ReplayReport) -> bool:
    """Whether the report's problems are request drifts alone: every recorded answer was
    used, in order, so the new requests can keep them."""
    drifts = {e.message for e in report.errors if e.kind == RequestDriftError.kind}
    return bool(drifts) and all(p in drifts for p in report.problems)


def drift_failures(report: ReplayReport) -> list[str]:
    """``request drift: …`` for each request-drift error of a replay report."""
    return [
        f"request drift: {error.message}"
        for error in report.errors
        if error.kind == RequestDriftError.kind
    ]


def _headers(path: Path) -> RecordedHeaders:
    log = read_log_bytes(read_file(path), str(path))
    return recorded_headers(log.events[log.header.effective_seed_length :])


_notes: FileCache[str] = FileCache()


def header_note(session_files: Sequence[Path]) -> str:
    """The scenario's request-header note, e.g. ``request header: not recorded (june-era),
    not checked``; mixed recordings name the status of each file. Read once per scenario and
    shared by every backend's run, as the expected fixtures are."""
    return _notes.get(session_files, lambda: _read_note(session_files))


def _read_note(session_files: Sequence[Path]) -> str:
    notes: dict[str, list[str]] = {}
    for path in session_files:
        try:
            note = _headers(path).note
        except (OSError, UnicodeDecodeError, DshError):
            continue  # an unreadable log fails the run elsewhere, with its own message
        notes.setdefault(note, []).append(path.name)
    if len(notes) <= 1:
        return next(iter(notes), "")
    return "; ".join(f"{note} ({', '.join(names)})" for note, names in notes.items())


def header_summary(notes: Sequence[tuple[str, str]]) -> str:
    """One line for the gate: how many runs had their request header checked, and which
    were not (``notes``: ``(scenario name, note)`` per run)."""
    counts = Counter(note.removeprefix(_NOTE_PREFIX) for _, note in notes if note)
    parts: list[str] = []
    for note, count in sorted(counts.items(), key=lambda item: item[0] != "checked"):
        names = sorted({name for name, n in notes if n.removeprefix(_NOTE_PREFIX) == note})
        shown = "" if note == "checked" else f": {', '.join(names)}"
        parts.append(f"{note} in {count} run{'s' if count != 1 else ''}{shown}")
    return _NOTE_PREFIX + "; ".join(parts) if parts else ""

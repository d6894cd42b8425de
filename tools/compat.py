"""Fidelity to upstream: replay the upstream TypeScript recordings through our agent.

Every scenario's logs must parse and derive a replay script (each session's entries, their chunk
counts and final texts are printed). A scenario that needs a harness op, a tool or a feature we
lack is not replayed: its row says what it needs (``needs op X``, ``needs tool Y``), and the
summary counts each need.

June era: the others replay through the real ``dsh-acp-agent`` (JSONL and SQLite) and must
reproduce upstream's stdout frame for frame and every session log event for event, forgiving
only the deliberate differences listed in COMPATIBILITY.md.

Later (head) era: the others replay once and are compared on what the client saw per prompt:
agent message text and stop reason.

Exits 1 if a replayed June scenario differs or a log does not parse; head replay mismatches
are reported in the table (and explained in COMPATIBILITY.md) but do not fail the run. A bug
in one scenario's run costs that row, never the whole run. The runs are the snapshot engine's
(``dsh_snapshot.run``); this script only loads, describes and tabulates.

Usage: ``python tools/compat.py [--corpus DIR] [--jobs N] [--scripts]``
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from dsh_core import DshError
from dsh_core.testing import upstream_corpus
from dsh_llm_replay import (
    HangEntry,
    ReplayEntry,
    SessionScript,
    ThrowEntry,
    load_session_scripts,
)
from dsh_snapshot import UPSTREAM_ALLOWANCES, Scenario, SnapshotSettings, load_scenario, run

ROOT = Path(__file__).resolve().parent.parent


def corpus_dir(given: str | None) -> Path:
    """``--corpus``, else ``DSH_UPSTREAM_CORPUS``, else ``../shared/upstream-corpus``, else the
    cache ``tools/fetch_upstream_corpus.py`` fills (``dsh_core.testing.upstream_corpus``)."""
    if given:
        return Path(given)
    return upstream_corpus(ROOT / "tools") or ROOT.parent / "shared" / "upstream-corpus"


@dataclass
class Row:
    """One line of the table."""

    scenario: str
    era: str
    sessions: int = 0
    calls: int = 0
    result: str = ""
    ok: bool = True
    scripts: list[str] = field(default_factory=list[str])


def _entry_text(entry: ReplayEntry) -> str:
    if isinstance(entry, HangEntry):
        return "hang"
    text = "".join(str(c.get("text", "")) for c in entry.chunks if c.get("type") == "text-delta")
    if isinstance(entry, ThrowEntry):
        return f"throw {entry.message!r} after {text!r}"
    return repr(text)


def describe_scripts(scripts: Sequence[SessionScript]) -> list[str]:
    """One line per session: its file, calls, chunk counts and final text."""
    lines: list[str] = []
    for script in scripts:
        counts = [len(e.chunks) if not isinstance(e, HangEntry) else 0 for e in script.entries]
        final = _entry_text(script.entries[-1]) if script.entries else "(no calls)"
        name = Path(script.source).name
        lines.append(
            f"{name}: {len(script.entries)} calls, chunks {counts}, "
            f"seedLength {script.header.seed_length}, final {final[:80]}"
        )
    return lines


def _load(folder: Path, era: str) -> tuple[Row, Scenario | None]:
    """The scenario's row with its scripts described, and the scenario if it can replay."""
    row = Row(folder.name, era)
    try:
        scenario = load_scenario(folder)
        scripts = load_session_scripts(
            scenario.primary_file, scenario.child_files, scenario.override_file
        )
        row.sessions = len(scripts)
        row.calls = sum(len(s.entries) for s in scripts)
        row.scripts = describe_scripts(scripts)
        needs = scenario.needs()
    except (DshError, OSError, ValueError) as exc:
        row.ok, row.result = False, f"PARSE FAILURE: {exc}"
        return row, None
    except Exception as exc:  # a bug of ours must cost one row, not the whole run
        row.ok, row.result = False, f"PARSE FAILURE (internal error): {exc!r}"
        return row, None
    if needs:
        row.result = f"not replayed: needs {'; '.join(needs)}"
        return row, None
    return row, scenario


def _loaded(folder: Path, era: str) -> tuple[list[Row], list[tuple[Row, Scenario]]]:
    pairs = [_load(p, era) for p in sorted(folder.iterdir()) if p.is_dir()]
    return [row for row, _ in pairs], [(row, s) for row, s in pairs if s is not None]


def june_rows(folder: Path, jobs: int) -> list[Row]:
    """Replay every June scenario we can on every installed store backend and compare
    everything."""
    rows, todo = _loaded(folder, "june")
    settings = SnapshotSettings(allowances=UPSTREAM_ALLOWANCES, jobs=jobs)
    results = run(settings, [s for _, s in todo])
    for row, scenario in todo:
        mine = [r for r in results if r.scenario is scenario]
        row.ok = all(r.ok for r in mine)
        failures = [f"{r.store}: {r.summary}" for r in mine if not r.ok]
        backends = ", ".join(settings.stores)
        row.result = f"reproduced ({backends})" if row.ok else "; ".join(failures)
    return rows


def head_rows(folder: Path, jobs: int) -> list[Row]:
    """Parse every head log; replay the eligible scenarios and compare what the client saw."""
    rows, todo = _loaded(folder, "head")
    settings = SnapshotSettings(stores=("jsonl",), check="messages", jobs=jobs)
    results = run(settings, [s for _, s in todo])
    for (row, _), result in zip(todo, results, strict=True):
        row.result = (
            "replayed: same messages and stop reasons"
            if result.ok
            else f"replayed: DIFFERS — {result.summary}"
        )
    return rows


def print_table(console: Console, rows: Sequence[Row], show_scripts: bool) -> None:
    """The table the issue asks for: scenario, era, sessions, calls, result."""
    table = Table(title="upstream corpus through dsh-py")
    for column in ("scenario", "era", "sessions", "calls", "result"):
        table.add_column(column, overflow="fold")
    for row in rows:
        style = None if row.ok else "red"
        table.add_row(
            row.scenario, row.era, str(row.sessions), str(row.calls), row.result, style=style
        )
    console.print(table)
    if show_scripts:
        for row in rows:
            for line in row.scripts:
                console.print(f"  {row.era}/{row.scenario} {line}", markup=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the June and head checks, print the table, exit 1 on a June failure or parse
    failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--corpus", help="the upstream-corpus folder")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--no-scripts", action="store_true", help="do not list each session's derived script"
    )
    args = parser.parse_args(argv)
    corpus = corpus_dir(args.corpus)
    console = Console(width=160)
    if not (corpus / "june").is_dir():
        if os.environ.get("CI", "").lower() == "true":  # CI has the corpus: missing is broken
            console.print(f"compat: failed: no upstream corpus at {corpus} (CI=true)")
            return 1
        console.print(
            f"compat: skipped: no upstream corpus at {corpus} "
            f"(run tools/fetch_upstream_corpus.py, or set DSH_UPSTREAM_CORPUS)"
        )
        return 0
    rows = june_rows(corpus / "june", args.jobs)
    if (corpus / "head").is_dir():
        rows += head_rows(corpus / "head", args.jobs)
    print_table(console, rows, show_scripts=not args.no_scripts)
    june = [r for r in rows if r.era == "june"]
    head = [r for r in rows if r.era == "head"]
    console.print(f"june: {_counts(june)}")
    console.print(f"head: {_counts(head)}")
    for need, count in _need_counts(rows):
        console.print(f"  {count:3d} scenarios need {need}", highlight=False)
    broken = [r for r in rows if r.result.startswith("PARSE FAILURE")]
    return 0 if not broken and all(r.ok for r in june) else 1


def _counts(rows: Sequence[Row]) -> str:
    """``N scenarios: R replayed (S identical), K need what we lack, P parse failures``."""
    lacking = [r for r in rows if r.result.startswith("not replayed")]
    broken = [r for r in rows if r.result.startswith("PARSE FAILURE")]
    replayed = [r for r in rows if r not in lacking and r not in broken]
    same = [r for r in replayed if r.ok and not r.result.startswith("replayed: DIFFERS")]
    return (
        f"{len(rows)} scenarios: {len(replayed)} replayed ({len(same)} identical), "
        f"{len(lacking)} need what we lack, {len(broken)} parse failures"
    )


def _need_counts(rows: Sequence[Row]) -> list[tuple[str, int]]:
    """How many scenarios need each missing op / tool / feature, most needed first."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.result.startswith("not replayed: needs "):
            for need in row.result.removeprefix("not replayed: needs ").split("; "):
                counts[need] = counts.get(need, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


if __name__ == "__main__":
    sys.exit(main())

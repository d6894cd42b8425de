"""Fidelity to upstream: replay the upstream TypeScript recordings through our agent.

June era: every scenario replays through the real ``dsh-acp-agent`` (JSONL and SQLite) and must
reproduce upstream's stdout frame for frame and every session log event for event, forgiving
only the deliberate differences listed in COMPATIBILITY.md.

Later (head) era: every log must parse and derive a replay script (each session's entries,
their chunk counts and final texts are printed); scenarios that use only tools we have (bash,
subagent, subagent_fork, none) and no feature we lack replay through our agent and are
compared on what the client saw per prompt: agent message text and stop reason.

Exits 1 if a June scenario fails or a head log does not parse; head replay mismatches are
reported in the table (and explained in COMPATIBILITY.md) but do not fail the run.

Usage: ``python tools/compat.py [--corpus DIR] [--jobs N] [--scripts]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from dsh_core import DshError
from dsh_llm_replay import (
    HangEntry,
    ReplayEntry,
    SessionScript,
    ThrowEntry,
    load_session_scripts,
    parse_session_log,
)
from dsh_snapshot import UPSTREAM_ALLOWANCES, RunOptions, Scenario, load_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent
OUR_TOOLS = frozenset({"bash", "subagent", "subagent_fork"})
OUR_OPS = frozenset(
    {"initialize", "newSession", "prompt", "promptAndCancel", "cancel", "promptExpectError"}
)
# Recordings that exercise an upstream feature this project does not implement; replaying
# them would compare our agent against behaviour it does not claim (COMPATIBILITY.md).
FEATURE_FILES = ("hooks.json", "codex-hooks.json")


def corpus_dir(given: str | None) -> Path:
    """``--corpus``, else ``DSH_UPSTREAM_CORPUS``, else ``../shared/upstream-corpus``."""
    if given:
        return Path(given)
    env = os.environ.get("DSH_UPSTREAM_CORPUS")
    return Path(env) if env else ROOT.parent / "shared" / "upstream-corpus"


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


def as_object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def session_files(folder: Path) -> list[Path]:
    """``session.jsonl`` then ``session.1.jsonl``, ``session.2.jsonl`` … as they exist."""
    children = sorted(folder.glob("session.*.jsonl"), key=lambda p: int(p.name.split(".")[1]))
    return [folder / "session.jsonl", *children]


def _scripts_of(folder: Path) -> list[SessionScript]:
    files = session_files(folder)
    override = folder / "replay.override.json"
    return load_session_scripts(files[0], files[1:], override if override.is_file() else None)


def used_tools(folder: Path) -> set[str]:
    """Every tool name a recording calls: ``tool/call`` events and tool-call blocks."""
    names: set[str] = set()
    for path in session_files(folder):
        for event in parse_session_log(path.read_text(encoding="utf-8"), str(path)):
            if event.type == "tool/call":
                names.add(str(event.data.get("name")))
            elif event.type == "assistant/chunk":
                chunk = as_object(event.data["chunk"])
                block = as_object(chunk.get("block"))
                if chunk.get("type") == "tool-call-delta" and "name" in chunk:
                    names.add(str(chunk["name"]))
                elif block.get("type") == "tool-call":
                    names.add(str(block.get("name")))
    return names


def why_not_replayed(folder: Path) -> str | None:
    """``None`` if the scenario only needs what we have; else what it needs that we lack."""
    steps = json.loads((folder / "input.json").read_text(encoding="utf-8")).get("steps", [])
    ops = {str(step.get("op")) for step in steps} - OUR_OPS
    if ops:
        return f"input ops {sorted(ops)}"
    tools = used_tools(folder) - OUR_TOOLS
    if tools:
        return f"tools {sorted(tools)}"
    workspace = folder / "workspace"
    if any((workspace / name).is_file() for name in FEATURE_FILES):
        return "hooks"
    return None


def june_rows(folder: Path, jobs: int) -> list[Row]:
    """Replay every June scenario on both backends and compare everything."""
    scenarios = [load_scenario(p) for p in sorted(folder.iterdir()) if p.is_dir()]
    runs = [
        (s, RunOptions(composition=c, allowances=UPSTREAM_ALLOWANCES))
        for s in scenarios
        for c in ("jsonl", "sqlite")
    ]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(run_scenario, [s for s, _ in runs], [o for _, o in runs]))
    rows: list[Row] = []
    for scenario in scenarios:
        mine = [r for r in results if r.scenario is scenario]
        ok = all(r.ok for r in mine)
        failures = [f"{r.options.composition}: {r.summary}" for r in mine if not r.ok]
        rows.append(
            Row(
                scenario.path.name,
                "june",
                sessions=mine[0].sessions,
                calls=mine[0].calls_replayed,
                ok=ok,
                result="reproduced (jsonl, sqlite)" if ok else "; ".join(failures),
                scripts=describe_scripts(_scripts_of(scenario.path)),
            )
        )
    return rows


def _head_row(folder: Path) -> tuple[Row, Scenario | None]:
    row = Row(folder.name, "head")
    try:
        scripts = _scripts_of(folder)
    except DshError as exc:
        row.ok, row.result = False, f"PARSE FAILURE: {exc}"
        return row, None
    row.sessions = len(scripts)
    row.calls = sum(len(s.entries) for s in scripts)
    row.scripts = describe_scripts(scripts)
    lacking = why_not_replayed(folder)
    if lacking is not None:
        row.result = f"parsed; not replayed (needs {lacking})"
        return row, None
    return row, load_scenario(folder)


def head_rows(folder: Path, jobs: int) -> list[Row]:
    """Parse every head log; replay the eligible scenarios and compare what the client saw."""
    pairs = [_head_row(p) for p in sorted(folder.iterdir()) if p.is_dir()]
    todo = [(row, s) for row, s in pairs if s is not None]
    options = RunOptions(check="messages")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(run_scenario, [s for _, s in todo], [options] * len(todo)))
    for (row, _), result in zip(todo, results, strict=True):
        row.result = (
            "replayed: same messages and stop reasons"
            if result.ok
            else f"replayed: DIFFERS — {result.summary}"
        )
    return [row for row, _ in pairs]


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
        console.print(f"compat: skipped: no upstream corpus at {corpus}")
        return 0
    rows = june_rows(corpus / "june", args.jobs)
    if (corpus / "head").is_dir():
        rows += head_rows(corpus / "head", args.jobs)
    print_table(console, rows, show_scripts=not args.no_scripts)
    june = [r for r in rows if r.era == "june"]
    head = [r for r in rows if r.era == "head"]
    replayed = [r for r in head if r.result.startswith("replayed")]
    same = [r for r in replayed if r.result.startswith("replayed: same")]
    parse_failures = [r for r in head if r.result.startswith("PARSE FAILURE")]
    june_ok = sum(r.ok for r in june)
    console.print(
        f"june: {june_ok}/{len(june)} reproduced; head: {len(head)} scenarios parsed with "
        f"{len(parse_failures)} parse failures, {len(same)}/{len(replayed)} replayed with the "
        f"same messages and stop reasons"
    )
    return 0 if june_ok == len(june) and not parse_failures else 1


if __name__ == "__main__":
    sys.exit(main())

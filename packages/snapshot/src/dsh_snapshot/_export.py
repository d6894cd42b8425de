"""``dsh-snapshot export --upstream june``: a scenario in upstream's June harness layout.

Our fixtures keep the session tree (``{{session:N}}`` names each session; children carry
``origin`` and ``delegationDepth``; the ``current`` loop logs ``request/header``). Upstream's
June harness (``examples/acp-agent/tests/snapshot-harness.ts``) reads a folder of
``input.json``, ``session.jsonl``, ``session.N.jsonl``, ``stdout.golden.jsonl`` and optional
``replay.override.json`` / ``workspace/``, spells every session id ``{{sessionId}}``, and its
agent's logs know none of those three fields or events. Exporting rewrites exactly those
differences, so the same recording runs in both harnesses; everything else is copied as is.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, TextIO, cast

from dsh_core import DshError, ScenarioFiles, dumps_json
from dsh_snapshot._confine import check_scenario_links, copy_workspace
from dsh_snapshot._fsafe import read_file, read_file_text
from dsh_snapshot._scenario import Scenario, load_scenario

__all__ = ["JUNE_AGENT_INFO", "add_export_parser", "export_june", "run_export"]

JUNE_AGENT_INFO = {"name": "deepseek-harness-acp", "version": "0.0.1"}
"""What upstream's June agent answers ``initialize`` with (every June golden has it)."""

# Header keys and event types upstream's June agent never writes.
_JUNE_UNKNOWN_HEADER_KEYS = ("origin", "delegationDepth")
_JUNE_UNKNOWN_EVENTS = frozenset({"request/header"})
_SESSION_TOKEN = re.compile(r"\{\{session:\d+\}\}")


def _flat(text: str) -> str:
    """Upstream's flat spelling: every session id is ``{{sessionId}}``."""
    return _SESSION_TOKEN.sub("{{sessionId}}", text)


def _june_log(path: Path) -> str:
    """One session log as upstream's June agent writes it.

    Events are renumbered when some are dropped, and ``seedLength`` counts only the seed
    events that are kept, so a fork child's boundary stays where it was.
    """
    lines = [line for line in read_file_text(path).split("\n") if line.strip()]
    header: dict[str, Any] = json.loads(lines[0])
    for key in _JUNE_UNKNOWN_HEADER_KEYS:
        header.pop(key, None)
    seed_length = header.get("seedLength")
    kept: list[dict[str, Any]] = []
    dropped_in_seed = 0
    for index, line in enumerate(lines[1:]):
        row: dict[str, Any] = json.loads(line)
        if row.get("type") in _JUNE_UNKNOWN_EVENTS:
            if isinstance(seed_length, int) and index < seed_length:
                dropped_in_seed += 1
            continue
        if "seq" in row:
            row["seq"] = len(kept)
        kept.append(row)
    if isinstance(seed_length, int):
        header["seedLength"] = seed_length - dropped_in_seed
    return _flat("".join(dumps_json(row) + "\n" for row in [header, *kept]))


def _june_stdout(path: Path) -> str:
    """The stdout frames with upstream's June ``agentInfo`` and session id spelling."""
    out: list[str] = []
    for line in read_file_text(path).split("\n"):
        if not line.strip():
            continue
        frame: dict[str, Any] = json.loads(line)
        result = frame.get("result")
        if isinstance(result, dict) and "agentInfo" in result:
            cast(dict[str, Any], result)["agentInfo"] = dict(JUNE_AGENT_INFO)
        out.append(dumps_json(frame) + "\n")
    return _flat("".join(out))


def export_june(scenario: Scenario, out: Path) -> list[str]:
    """Write ``scenario`` to the new folder ``out`` in upstream's June layout.

    Returns:
        Notes on what the June harness will see differently (a ``current``-loop scenario).

    Raises:
        FileExistsError: ``out`` exists and is not empty; nothing is written.
        DshError: the scenario has no recording to export.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty folder; nothing was written")
    if not scenario.session_files or not scenario.stdout_file.is_file():
        raise DshError(f"{scenario.path}: no recording to export (session.jsonl and stdout)")
    # The export is read as the gate reads a scenario (CI feeds it to upstream's harness): no
    # entry is a link leading out, no file is read through a link, the workspace is copied
    # entry by entry without following any.
    check_scenario_links(scenario)
    copied = {ScenarioFiles.INPUT: read_file(scenario.path / ScenarioFiles.INPUT)}
    if scenario.override_file is not None:
        copied[ScenarioFiles.OVERRIDE] = read_file(scenario.override_file)
    logs = {source.name: _june_log(source) for source in scenario.session_files}
    stdout = _june_stdout(scenario.stdout_file)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in copied.items():
        (out / name).write_bytes(data)
    for name, text in logs.items():
        (out / name).write_text(text, encoding="utf-8")
    (out / ScenarioFiles.UPSTREAM_STDOUT).write_text(stdout, encoding="utf-8")
    if scenario.workspace is not None:
        copy_workspace(scenario.workspace, out / "workspace")
    notes: list[str] = []
    if scenario.loop != "june":
        notes.append(
            f"{scenario.name} runs the '{scenario.loop}' loop; upstream's June agent runs "
            f"sibling subagent calls one after the other, so its frames may differ"
        )
    return notes


def add_export_parser(sub: Any) -> None:
    """Register ``export`` on the CLI's subparsers."""
    subparsers = cast("argparse._SubParsersAction[argparse.ArgumentParser]", sub)
    help_text = "write a scenario in upstream's harness layout and spelling (a new folder)"
    cmd = subparsers.add_parser("export", help=help_text, description=help_text)
    cmd.add_argument("--upstream", choices=["june"], required=True, help="upstream's harness era")
    cmd.add_argument("path", type=Path, metavar="PATH", help="the scenario folder")
    cmd.add_argument("out", type=Path, metavar="OUT", help="the folder to write (new or empty)")


def run_export(path: Path, out: Path, err: TextIO | None = None) -> int:
    """Export one scenario; 0, or 2 with one line naming the file when it cannot be."""
    stream = err if err is not None else sys.stderr
    try:
        scenario = load_scenario(path)
        notes = export_june(scenario, out)
    except (DshError, OSError, ValueError) as exc:
        print(f"dsh-snapshot export: {' '.join(str(exc).split())}", file=stream)
        return 2
    for note in notes:
        print(f"note: {note}", file=stream)
    print(f"exported {scenario.name} -> {out}")
    return 0

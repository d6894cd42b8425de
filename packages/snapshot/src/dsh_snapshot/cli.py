"""``dsh-snapshot``: replay, refresh, record, list and prove scenario folders given by path.

Paths may be scenario folders (holding ``input.json``) or folders containing them, ours or
upstream ones, wherever they are. Exit status: 0 when everything passed (or ``record`` skipped
for want of a key), 1 on any failure, 2 on bad usage or a malformed scenario.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from rich.console import Console
from rich.table import Table

from dsh_snapshot._batch import jobs_from, print_results, run_many, run_proof
from dsh_snapshot._record import RecordSettings, preflight_problem, print_record_summary, record_all
from dsh_snapshot._runner import Composition, Mode, RunOptions
from dsh_snapshot._scaffold import add_new_parser, mark_scripted, run_new
from dsh_snapshot._scenario import Scenario, ScenarioError, discover
from dsh_snapshot._warm import COLD_ENV, cold_by_default

__all__ = ["main", "record_key"]

_COMPOSITIONS: tuple[Composition, ...] = ("jsonl", "sqlite")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dsh-snapshot", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        cmd.add_argument("paths", nargs="+", type=Path, metavar="PATH")
        return cmd

    for name, help_text in (
        ("replay", "keyless gate: replay each scenario, compare its logs and stdout"),
        ("refresh", "keyless: replay the committed scripts and rewrite the expected outputs"),
        ("record", "record against the live API (loads ./.env; skips without a key)"),
        ("proof", "the fork scenarios must go red with the seedLength slice off, green with it"),
    ):
        cmd = add(name, help_text)
        cmd.add_argument(
            "--jobs",
            "-j",
            default="1" if name == "record" else "auto",
            help="parallel runs: a number or 'auto' (CPU count)",
        )
        cmd.add_argument(
            "--timeout",
            type=float,
            default=60.0,
            help="seconds any single wait for the agent may take (default 60)",
        )
        cmd.add_argument(
            "--cold",
            action="store_true",
            default=cold_by_default(),
            help="start every agent as a fresh interpreter instead of forking it from a warm, "
            f"pre-imported one per worker (default: warm; {COLD_ENV}=1 makes cold the default)",
        )
        if name == "replay":
            cmd.add_argument(
                "--composition",
                default="jsonl,sqlite",
                help="comma-separated persistence backends (default jsonl,sqlite)",
            )
        if name == "record":
            cmd.add_argument(
                "--scripted",
                action="store_true",
                help="keyless: record against the scripted model server "
                "(model.script.json) and mark the scenario 'scripted'",
            )
            cmd.add_argument(
                "--retries",
                type=int,
                default=None,
                help="re-record a live recording that misses its expectations up to this "
                "many times (default: DSH_RECORD_RETRIES, else 2)",
            )
    listing = add("list", "list the scenarios under the given paths, with model and age")
    listing.add_argument(
        "--max-age",
        type=int,
        default=None,
        metavar="DAYS",
        help="exit 1 when a live recording is older than DAYS days",
    )
    add_new_parser(sub)
    return parser


def record_key() -> str | None:
    """``DEEPSEEK_API_KEY`` after loading ``./.env`` (record mode is the only caller)."""
    from dotenv import load_dotenv  # noqa: PLC0415 - .env is read in record mode only

    load_dotenv(Path.cwd() / ".env", override=False)
    key = os.environ.get("DEEPSEEK_API_KEY", "").strip()
    return key or None


def _list(console: Console, scenarios: Sequence[Scenario], max_age: int | None) -> int:
    table = Table(title="dsh-snapshot scenarios")
    for column in ("scenario", "recording", "model", "age", "sessions", "steps", "fork", "path"):
        table.add_column(column, overflow="fold")
    stale: list[str] = []
    for s in scenarios:
        provenance = s.meta.provenance if s.meta else None
        age = provenance.age_days() if provenance else None
        if age is not None and max_age is not None and age > max_age:
            stale.append(
                f"{s.name} was recorded {age} days ago ({provenance and provenance.recordedAt})"
            )
        table.add_row(
            s.name,
            s.meta.recording if s.meta else "upstream",
            provenance.model if provenance else "",
            f"{age} days" if age is not None else "",
            str(len(s.session_files)),
            str(len(s.steps)),
            "yes" if s.fork_children else "",
            str(s.path),
        )
    console.print(table)
    console.print(f"{len(scenarios)} scenarios", highlight=False)
    for line in stale:
        console.print(
            f"dsh-snapshot list: {line}, more than --max-age {max_age}: re-record it "
            "(nox -s snapshot_record)",
            highlight=False,
        )
    return 1 if stale else 0


def _record(console: Console, scenarios: Sequence[Scenario], args: argparse.Namespace) -> int:
    scripted = cast(bool, args.scripted)
    api_key = None
    if not scripted:
        api_key = record_key()
        if api_key is None:
            print(
                "dsh-snapshot record: skipped: no DEEPSEEK_API_KEY in the environment or "
                "./.env (use `dsh-snapshot record --scripted` to record keylessly)"
            )
            return 0
        problem = preflight_problem()
        if problem is not None:
            console.print(
                f"dsh-snapshot record: stopped before any scenario, nothing written: {problem}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            return 1
    retries = cast(int | None, args.retries)
    options = RunOptions(
        mode="record-scripted" if scripted else "record",
        timeout=cast(float, args.timeout),
        api_key=api_key,
    )
    runs = record_all(
        console,
        scenarios,
        options,
        RecordSettings().retries if retries is None else max(retries, 0),
        jobs_from(cast(str, args.jobs)),
    )
    print_record_summary(console, runs)
    return 0 if all(r.result.ok for r in runs) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsh-snapshot`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    console = Console(width=max(Console().width, 160))
    command: str = args.command
    if command == "new":
        return run_new(cast(str, args.name), cast(Path, args.dir))
    if command == "record" and cast(bool, args.scripted):
        mark_scripted(cast(list[Path], args.paths))  # record --scripted makes a folder ours
    try:
        scenarios = discover(cast(list[Path], args.paths))
    except ScenarioError as exc:
        console.print(f"dsh-snapshot: {exc}", highlight=False, markup=False)
        return 2
    if command == "list":
        return _list(console, scenarios, cast(int | None, args.max_age))
    if not scenarios:
        console.print(
            "dsh-snapshot: no scenario folders (holding input.json) under "
            + ", ".join(str(p) for p in args.paths),
            highlight=False,
        )
        return 1
    jobs = jobs_from(cast(str, args.jobs))
    timeout = cast(float, args.timeout)
    cold = cast(bool, args.cold)
    if command == "proof":
        proof = RunOptions(timeout=timeout, cold=cold)
        return 0 if run_proof(console, scenarios, proof, jobs) else 1
    if command == "record":
        return _record(console, scenarios, args)
    mode: Mode = cast(Mode, command)
    compositions: list[Composition] = ["jsonl"]
    if command == "replay":
        names = [c.strip() for c in cast(str, args.composition).split(",") if c.strip()]
        bad = [n for n in names if n not in _COMPOSITIONS]
        if bad or not names:
            console.print(
                f"dsh-snapshot: unknown composition {bad or names}; "
                f"choose from {', '.join(_COMPOSITIONS)}",
                highlight=False,
            )
            return 2
        compositions = cast(list[Composition], names)
    options = RunOptions(mode=mode, timeout=timeout, cold=cold)
    results = run_many(scenarios, options, compositions, jobs)
    print_results(console, results, f"dsh-snapshot {command}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

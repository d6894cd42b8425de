"""dsh-snapshot: replay, refresh, record, list, prove and show scenario folders given by path.

Paths may be scenario folders (holding input.json), files inside one, or folders containing
them, ours or upstream ones, wherever they are. A malformed scenario is reported as a failed row
and the rest of the batch still runs.

Exit status, the same for every subcommand: 0 when everything passed (or record skipped for want
of a key); 1 on any failure, including no scenarios under the given paths; 2 on bad usage or a
malformed scenario.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import NoReturn, cast

from rich.console import Console
from rich.table import Table

from dsh_snapshot._batch import print_broken, print_results, run_many, run_proof
from dsh_snapshot._record import RecordSettings, preflight_problem, print_record_summary, record_all
from dsh_snapshot._report import add_report_argument, write_report_if_asked
from dsh_snapshot._runner import Composition, Mode, RunOptions
from dsh_snapshot._scaffold import add_new_parser, mark_scripted, run_new
from dsh_snapshot._scenario import BrokenScenario, Scenario, ScenarioError, discover_each
from dsh_snapshot._show import add_show_parser, run_show
from dsh_snapshot._warm import COLD_ENV, cold_by_default

__all__ = ["main", "record_key"]

_COMPOSITIONS: tuple[Composition, ...] = ("jsonl", "sqlite")
_EXIT_FAILED = 1
_EXIT_USAGE = 2
_EXIT_EPILOG = (
    "exit status: 0 everything passed; 1 a failure, or no scenarios under the paths; "
    "2 bad usage or a malformed scenario"
)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (its subcommand parsers are of this class too)."""

    def error(self, message: str) -> NoReturn:
        self.exit(_EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _jobs(text: str) -> int:
    """``--jobs``: ``auto`` (the CPU count) or a whole number of at least 1."""
    if text == "auto":
        return max(os.cpu_count() or 1, 1)
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'auto' nor a whole number >= 1")
    return jobs


def _number(kind: type[int] | type[float], least: float, what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not value >= least:  # also rejects nan
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {least:g}")
        return value

    parse.__name__ = what  # argparse names the type in its own messages
    return parse


def _compositions(text: str) -> list[Composition]:
    names = [c.strip() for c in text.split(",") if c.strip()]
    bad = [n for n in names if n not in _COMPOSITIONS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown composition {', '.join(bad) or repr(text)}; "
            f"choose from {', '.join(_COMPOSITIONS)}"
        )
    return cast(list[Composition], names)


def _version() -> str:
    try:
        return version("dsh-snapshot")
    except PackageNotFoundError:  # a source tree that is not installed
        return "0+unknown"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dsh-snapshot",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text, description=help_text, epilog=_EXIT_EPILOG)
        cmd.add_argument("paths", nargs="+", type=Path, metavar="PATH")
        cmd.add_argument(
            "-k",
            dest="names",
            action="append",
            default=None,
            metavar="TEXT",
            help="only scenarios whose name (profile/name) contains TEXT, case-insensitive; "
            "repeat to select any of several",
        )
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
            type=_jobs,
            default=_jobs("1" if name == "record" else "auto"),
            metavar="N",
            help="parallel runs: a number >= 1 or 'auto' (CPU count)",
        )
        cmd.add_argument(
            "--timeout",
            type=_number(float, 0.001, "a number of seconds"),
            default=60.0,
            metavar="SECONDS",
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
            add_report_argument(cmd)
            cmd.add_argument(
                "--composition",
                type=_compositions,
                default=_compositions("jsonl,sqlite"),
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
                type=_number(int, 0, "a whole number"),
                default=None,
                help="re-record a live recording that misses its expectations up to this "
                "many times (default: DSH_RECORD_RETRIES, else 2)",
            )
    listing = add("list", "list the scenarios under the given paths, with model and age")
    listing.add_argument(
        "--max-age",
        type=_number(int, 0, "a whole number of days"),
        default=None,
        metavar="DAYS",
        help="exit 1 when a live recording is older than DAYS days",
    )
    add_new_parser(sub)
    add_show_parser(sub)
    return parser


def record_key() -> str | None:
    """``DEEPSEEK_API_KEY`` after loading ``./.env`` (record mode is the only caller)."""
    from dotenv import load_dotenv  # noqa: PLC0415 - .env is read in record mode only

    load_dotenv(Path.cwd() / ".env", override=False)
    key = os.environ.get("DEEPSEEK_API_KEY", "").strip()
    return key or None


def _list(
    console: Console,
    scenarios: Sequence[Scenario],
    broken: Sequence[BrokenScenario],
    max_age: int | None,
) -> int:
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
    for b in broken:
        table.add_row(b.name, "[red]MALFORMED[/red]", "", "", "", "", "", str(b.path))
    console.print(table)
    print_broken(console, broken)
    tail = f", {len(broken)} malformed" if broken else ""
    console.print(f"{len(scenarios) + len(broken)} scenarios{tail}", highlight=False)
    for line in stale:
        console.print(
            f"dsh-snapshot list: {line}, more than --max-age {max_age}: re-record it "
            "(nox -s snapshot_record)",
            highlight=False,
        )
    if broken:
        return _EXIT_USAGE
    return _EXIT_FAILED if stale else 0


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
            return _EXIT_FAILED
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
        cast(int, args.jobs),
    )
    print_record_summary(console, runs)
    return 0 if all(r.result.ok for r in runs) else 1


def _selected(scenarios: list[Scenario], names: list[str] | None) -> list[Scenario]:
    if not names:
        return scenarios
    wanted = [n.casefold() for n in names]
    return [s for s in scenarios if any(w in s.name.casefold() for w in wanted)]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsh-snapshot`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    console = Console(width=max(Console().width, 160))
    command: str = args.command
    if command == "new":
        return run_new(cast(str, args.name), cast(Path, args.dir))
    if command == "show":
        return run_show(cast(list[Path], args.paths), cast(Path | None, args.html))
    paths = cast(list[Path], args.paths)
    if command == "record" and cast(bool, args.scripted):
        mark_scripted(paths)  # record --scripted makes a folder ours
    try:
        scenarios, broken = discover_each(paths)
    except ScenarioError as exc:
        console.print(f"dsh-snapshot: {exc}", highlight=False, markup=False)
        return _EXIT_USAGE
    names = cast(list[str] | None, args.names)
    scenarios = _selected(scenarios, names)
    if names:
        broken = [b for b in broken if any(n.casefold() in b.name.casefold() for n in names)]
    if not scenarios and not broken:
        chosen = f" matching -k {' or '.join(names)}" if names else ""
        console.print(
            f"dsh-snapshot: no scenarios{chosen} (folders holding input.json) under "
            + ", ".join(str(p) for p in paths),
            highlight=False,
            markup=False,
        )
        return _EXIT_FAILED
    if command == "list":
        return _list(console, scenarios, broken, cast(int | None, args.max_age))
    status = _run(console, command, scenarios, broken, args)
    return _EXIT_USAGE if broken else status


def _run(
    console: Console,
    command: str,
    scenarios: list[Scenario],
    broken: list[BrokenScenario],
    ns: argparse.Namespace,
) -> int:
    """Run the batch; malformed scenarios are failed rows of its report, never run."""
    jobs = cast(int, ns.jobs)
    timeout = cast(float, ns.timeout)
    cold = cast(bool, ns.cold)
    if command == "proof":
        proof = RunOptions(timeout=timeout, cold=cold)
        print_broken(console, broken)
        return 0 if run_proof(console, scenarios, proof, jobs) else _EXIT_FAILED
    if command == "record":
        print_broken(console, broken)
        return _record(console, scenarios, ns)
    mode: Mode = cast(Mode, command)
    compositions: list[Composition] = ["jsonl"]
    if command == "replay":
        compositions = cast(list[Composition], ns.composition)
    options = RunOptions(mode=mode, timeout=timeout, cold=cold)
    results = run_many(scenarios, options, compositions, jobs)
    print_results(console, results, f"dsh-snapshot {command}", broken)
    write_report_if_asked(ns, results, broken, console)
    return 0 if all(r.ok for r in results) else _EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

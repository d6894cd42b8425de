"""dsh-snapshot: replay, refresh, record, list, prove, review, accept, show and export scenario
folders given by path.

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
from typing import Any, NoReturn, cast

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dsh_core.plugins import PluginError, default_store_backend_names, store_backend_names
from dsh_snapshot._batch import print_broken, print_results, run_proof
from dsh_snapshot._discover import BrokenScenario
from dsh_snapshot._engine import Selection, record_key, record_preflight, run, select
from dsh_snapshot._export import add_export_parser, run_export
from dsh_snapshot._foreign import ForeignAgent, add_agent_arguments, agent_from_arguments
from dsh_snapshot._fsafe import ConfinedPathError
from dsh_snapshot._record import RecordSettings, print_record_summary, record_all
from dsh_snapshot._report import add_report_argument, write_report_if_asked
from dsh_snapshot._review import REVIEW_COMMANDS, no_scenarios_message, review_command
from dsh_snapshot._safeout import safe_console, safe_output
from dsh_snapshot._scaffold import add_new_parser, mark_scripted, run_new
from dsh_snapshot._scenario import Scenario, ScenarioError
from dsh_snapshot._settings import SnapshotSettings
from dsh_snapshot._show import add_show_parser, run_show
from dsh_snapshot._warm import COLD_ENV, cold_by_default

__all__ = ["main", "record_key"]

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


def _stores(text: str) -> list[str]:
    """``--store``: comma-separated names of installed store backends (``dsh.stores``)."""
    names = [c.strip() for c in text.split(",") if c.strip()]
    known = store_backend_names()
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown store backend {', '.join(bad) or repr(text)}; choose from {', '.join(known)}"
        )
    return names


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
            "--run-timeout",
            type=_number(float, 0.001, "a number of seconds"),
            default=None,
            metavar="SECONDS",
            help="seconds one scenario run may take in all, however often the agent speaks "
            "(default: 3 x --timeout)",
        )
        cmd.add_argument(
            "--cold",
            action="store_true",
            default=cold_by_default(),
            help="start every agent as a fresh interpreter instead of forking it from a warm, "
            f"pre-imported one per worker (default: warm; {COLD_ENV}=1 makes cold the default)",
        )
        if name != "proof":
            add_agent_arguments(cmd)
        if name == "replay":
            add_report_argument(cmd)
            cmd.add_argument(
                "--store",
                type=_stores,
                default=None,
                metavar="NAMES",
                help="comma-separated store backends (default: every installed embedded "
                f"one, now {','.join(default_store_backend_names())}; a server store only "
                "when named)",
            )
            # The option's old names: one concept, one word, "store" (snapshot.yml's key too);
            # deprecated, removed in 0.3.0.
            for old in _OLD_STORE_OPTIONS:
                cmd.add_argument(old, type=_stores, default=None, help=argparse.SUPPRESS)
        if name == "record":
            how = cmd.add_mutually_exclusive_group()
            how.add_argument(
                "--scripted",
                action="store_true",
                help="keyless: record against the scripted model server "
                "(model.script.json) and mark the scenario 'scripted'",
            )
            how.add_argument(
                "--keep-answers",
                action="store_true",
                help="keyless, for a scenario with agent:: record the agent's new requests "
                "(a changed prompt, system prompt or tools) with the recorded answers, "
                "which are NOT asked again; fails when the run needs other calls",
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
    for name, help_text in REVIEW_COMMANDS.items():
        add(name, help_text)
    add_new_parser(sub)
    add_show_parser(sub)
    add_export_parser(sub)
    return parser


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
            escape(s.name),
            s.meta.recording if s.meta else "upstream",
            escape(provenance.model) if provenance else "",
            f"{age} days" if age is not None else "",
            str(len(s.session_files)),
            str(len(s.steps)),
            "yes" if s.fork_children else "",
            escape(str(s.path)),
        )
    for b in broken:
        table.add_row(
            escape(b.name), "[red]MALFORMED[/red]", "", "", "", "", "", escape(str(b.path))
        )
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


def _record(console: Console, scenarios: Sequence[Scenario], settings: SnapshotSettings) -> int:
    if settings.mode == "record":
        try:
            preflight = record_preflight(lambda line: print(f"dsh-snapshot record: {line}"))
        except PluginError as exc:  # DSH_RECORD_PROVIDER names nothing usable
            print(f"dsh-snapshot record: {exc}", file=sys.stderr)
            return _EXIT_USAGE
        if preflight.skipped is not None:
            print(
                f"dsh-snapshot record: {preflight.skipped} "
                "(use `dsh-snapshot record --scripted` to record keylessly)"
            )
            return 0
        if preflight.stopped is not None:
            console.print(
                f"dsh-snapshot record: {preflight.stopped}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            return _EXIT_FAILED
        settings = preflight.settings(settings)
    runs = record_all(console, scenarios, settings)
    print_record_summary(console, runs)
    return 0 if all(r.result.ok for r in runs) else 1


def _settings(args: argparse.Namespace) -> SnapshotSettings:
    """The engine's settings from the command line (the CLI is a front end over the engine)."""
    command = cast(str, args.command)
    fields: dict[str, Any] = {
        "paths": tuple(cast(list[Path], args.paths)),
        "names": tuple(cast(list[str] | None, args.names) or ()),
    }
    if command != "list" and command not in REVIEW_COMMANDS:
        fields |= {
            "jobs": cast(int, args.jobs),
            "timeout": cast(float, args.timeout),
            "run_timeout": cast(float | None, args.run_timeout),
            "cold": cast(bool, args.cold),
            "agent": cast(ForeignAgent | None, getattr(args, "foreign_agent", None)),
        }
    if command == "replay":
        chosen = _chosen_stores(args)
        if chosen:  # else the settings' default: every installed embedded backend
            fields["stores"] = tuple(chosen)
    elif command == "refresh":
        fields["mode"] = "refresh"
    elif command == "record":
        fields["mode"] = "record-scripted" if cast(bool, args.scripted) else "record"
        if cast(bool, args.keep_answers):
            fields["mode"] = "record-accept"
        retries = cast(int | None, args.retries)
        fields["retries"] = RecordSettings().retries if retries is None else retries
    return SnapshotSettings(**fields)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsh-snapshot`` console script; returns the exit status.

    All output is redacted and its control characters escaped (``_safeout``).
    """
    with safe_output():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.foreign_agent = agent_from_arguments(parser, args)
    console = safe_console(width=max(Console().width, 160))
    command: str = args.command
    if command == "new":
        return run_new(cast(str, args.name), cast(Path | None, args.dir), args.foreign)
    if command == "show":
        return run_show(cast(list[Path], args.paths), cast(Path | None, args.html))
    if command == "export":
        return run_export(cast(Path, args.path), cast(Path, args.out))
    settings = _settings(args)
    if settings.mode == "record-scripted":
        mark_scripted(settings.paths, settings.timeout)  # record --scripted: the folder is ours
    try:
        selection = select(settings)
    except ScenarioError as exc:
        console.print(f"dsh-snapshot: {exc}", highlight=False, markup=False)
        return _EXIT_USAGE
    scenarios, broken = selection.scenarios, selection.broken
    if not scenarios and not broken:
        proxy_only = command in REVIEW_COMMANDS and not settings.names
        if proxy_only and (note := no_scenarios_message(command, settings.paths)):
            console.print(note, highlight=False, markup=False)
            return _EXIT_FAILED
        chosen = f" matching -k {' or '.join(settings.names)}" if settings.names else ""
        console.print(
            f"dsh-snapshot: no scenarios{chosen} (folders holding input.json) under "
            + ", ".join(str(p) for p in settings.paths),
            highlight=False,
            markup=False,
        )
        return _EXIT_FAILED
    if command == "list":
        return _list(console, scenarios, broken, cast(int | None, args.max_age))
    if command in REVIEW_COMMANDS:
        print_broken(console, broken)
        return _EXIT_USAGE if broken else review_command(command, scenarios)
    status = _run(console, args, settings, selection)
    return _EXIT_USAGE if broken else status


def _run(
    console: Console, args: argparse.Namespace, settings: SnapshotSettings, selection: Selection
) -> int:
    """Run the batch; malformed scenarios are failed rows of its report, never run."""
    command = cast(str, args.command)
    if command == "proof":
        print_broken(console, selection.broken)
        return 0 if run_proof(console, selection.scenarios, settings) else _EXIT_FAILED
    if command == "record":
        print_broken(console, selection.broken)
        return _record(console, selection.scenarios, settings)
    # Only the HTML report shows a run's outputs (its diffs); otherwise keep just verdicts.
    html = getattr(args, "html_report", None) is not None
    results = run(settings, selection.scenarios, keep_outputs=html)
    print_results(console, results, f"dsh-snapshot {command}", selection.broken)
    try:
        write_report_if_asked(args, results, selection.broken, console)
    except ConfinedPathError as exc:
        console.print(
            f"dsh-snapshot: HTML report not written: {exc}", highlight=False, markup=False
        )
        return _EXIT_USAGE
    return 0 if all(r.ok for r in results) else _EXIT_FAILED


_OLD_STORE_OPTIONS = ("--persistence", "--composition")


def _chosen_stores(ns: argparse.Namespace) -> list[str] | None:
    chosen = cast(list[str] | None, ns.store)
    for option in _OLD_STORE_OPTIONS:
        old = cast(list[str] | None, getattr(ns, option.lstrip("-")))
        if old is not None:
            print(
                f"dsh-snapshot: {option} is deprecated (removal in 0.3.0), use --store",
                file=sys.stderr,
            )
            chosen = chosen or old
    return chosen


if __name__ == "__main__":
    sys.exit(main())

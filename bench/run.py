"""Run every ``bench/bench_*.py`` and write ``BENCHMARKS.md`` at the repository root.

Each benchmark module has ``run(quick: bool) -> str`` returning one Markdown section. A full
run (what ``nox -s bench`` does) rewrites ``BENCHMARKS.md``; ``--quick`` (small inputs, a
smoke test) and ``--only NAME`` print to stdout instead, so a partial run never replaces the
committed numbers unless ``--output`` says where to write.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import cast

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent

BenchRun = Callable[[bool], str]


def discover() -> dict[str, Path]:
    """Benchmark names (``bench_persistence.py`` → ``persistence``) and their files."""
    return {path.stem.removeprefix("bench_"): path for path in sorted(BENCH_DIR.glob("bench_*.py"))}


def load(name: str, path: Path) -> BenchRun:
    """Import one benchmark module by path and return its ``run``."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look modules up by name
    spec.loader.exec_module(module)
    run = getattr(module, "run", None)
    if not callable(run):
        raise TypeError(f"{path} has no run(quick: bool) -> str")
    return cast(BenchRun, run)


def machine() -> str:
    """One line describing where the numbers were measured."""
    return (
        f"{os.cpu_count()} cores ({platform.machine()}, {platform.system()} "
        f"{platform.release()}), Python {platform.python_version()} "
        f"({platform.python_implementation()}), SQLite {sqlite3.sqlite_version}"
    )


def command(args: argparse.Namespace) -> str:
    """The command that reproduces this run."""
    extra: list[str] = []
    if args.quick:
        extra.append("--quick")
    only: list[str] = args.only or []
    for name in only:
        extra += ["--only", name]
    return "nox -s bench" + (" -- " + " ".join(extra) if extra else "")


def replace_sections(report: str, sections: dict[str, str]) -> str:
    """``report`` with the section of each benchmark in ``sections`` replaced by its new text.

    A section runs from its ``## `` heading (the one naming ``bench/bench_NAME.py``) to the
    next ``## `` heading; a benchmark without one in ``report`` is appended at the end.
    """
    lines = report.splitlines(keepends=True)
    for name, section in sections.items():
        marker = f"`bench/bench_{name}.py`"
        start = next(
            (i for i, line in enumerate(lines) if line.startswith("## ") and marker in line),
            None,
        )
        new = [line for line in (section.rstrip("\n") + "\n\n").splitlines(keepends=True)]
        if start is None:
            if lines and lines[-1].strip():
                lines.append("\n")
            lines += new
            continue
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
        )
        lines[start:end] = new
    return "".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks and write (or print) the report. Returns the exit code."""
    available = discover()
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs: a smoke run")
    parser.add_argument(
        "--import-only",
        action="store_true",
        help="import every selected benchmark and check it has run(), measuring nothing "
        "(CI's cheap form of nox -s bench)",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        choices=sorted(available),
        help="run only this benchmark (repeatable): " + ", ".join(sorted(available)),
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="where to write the report (default: BENCHMARKS.md for a full run, "
        "stdout for --quick or --only)",
    )
    args = parser.parse_args(argv)
    selected = args.only or sorted(available)
    if args.import_only:
        for name in selected:
            load(name, available[name])
            print(f"bench: {name} imports and has run()", file=sys.stderr)
        return 0
    sections: list[str] = []
    by_name: dict[str, str] = {}
    for name in selected:
        started = time.perf_counter()
        print(f"bench: {name} …", file=sys.stderr, flush=True)
        section = load(name, available[name])(args.quick)
        print(f"bench: {name} done in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        sections.append(section.strip() + "\n")
        by_name[name] = section.strip() + "\n"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    report = "\n".join(
        [
            "# Benchmarks\n",
            f"- Machine: {machine()}",
            f"- Date: {now}",
            f"- Command: `{command(args)}`\n",
            "Numbers are wall-clock on a shared machine; re-run the command to reproduce.\n",
            *sections,
        ]
    )
    output: Path | None = args.output
    if output is None and not args.quick:
        output = ROOT / "BENCHMARKS.md"
        if args.only and output.is_file():
            report = replace_sections(output.read_text(encoding="utf-8"), by_name)
    if output is None:
        sys.stdout.write(report)
    else:
        output.write_text(report, encoding="utf-8")
        print(f"bench: wrote {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

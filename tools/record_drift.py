"""Which scenarios drifted in a re-record: a markdown report for a CI job summary.

Run after ``nox -s snapshot_record`` in a git checkout: for each scenario folder under the given
paths (default ``snapshots``) it lists the fixture files the recording changed against ``HEAD``
(``snapshot.yml`` aside: its provenance changes on every live record), checks the folder's
``expect:`` against its logs as they are now, and shows the provenance the record wrote.
The report goes to ``--output`` (default: ``$GITHUB_STEP_SUMMARY`` when set, else stdout).

Exit status: 0, 1 when a scenario misses its expectations, 2 outside a git checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh_core import host_which
from dsh_snapshot import Scenario, discover
from dsh_snapshot._expect import check_expectations


class NotInGitError(Exception):
    """A scenario folder is not inside a git checkout."""


def _changed_files(folder: Path) -> list[str]:
    """Files under ``folder`` that differ from ``HEAD`` (modified, added, deleted, untracked)."""
    # git from absolute PATH entries only, never started in the scenario folder: a relative
    # entry (./node_modules/.bin) would find a git the pull request committed there.
    git = host_which("git") or "git"
    run = subprocess.run(
        [git, "-C", str(folder), "status", "--porcelain=v1", "--untracked-files=all", "--", "."],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    if run.returncode != 0:
        raise NotInGitError(f"{folder}: not in a git checkout (drift is measured against HEAD)")
    out = run.stdout
    names: list[str] = []
    for line in out.splitlines():
        path = Path(line[3:].split(" -> ")[-1].strip('"'))
        if path.name != "snapshot.yml":
            names.append(f"{'-' if line[:2].strip() == 'D' else ''}{path.name}")
    return sorted(names)


# Markdown that could end a table cell, open HTML (a comment hides the rows after it), a link or
# emphasis; GitHub renders a backslash before any of them as the character itself. Newlines go,
# so nothing can start a line (a heading, a new table).
_MARKDOWN = re.compile(r"([\\`*_\[\]<>|~&])")


def _cell(text: object) -> str:
    """Scenario data (names, models, expectation texts) as one inert table cell."""
    shown = "".join(
        f"\\u{ord(c):04x}" if unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp"} else c
        for c in " ".join(str(text).split())
    )
    return _MARKDOWN.sub(r"\\\1", shown)


def _logs(scenario: Scenario) -> list[list[Any]]:
    return [
        [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
        for p in scenario.session_files
    ]


def report(scenarios: Sequence[Scenario]) -> tuple[str, bool]:
    """The markdown report, and whether every scenario meets its expectations."""
    rows: list[str] = []
    drifted = 0
    all_met = True
    for s in scenarios:
        changed = _changed_files(s.path)
        drifted += bool(changed)
        expect = s.meta.expect if s.meta else None
        missed = check_expectations(expect, _logs(s)) if expect else []
        all_met = all_met and not missed
        prov = s.meta.provenance if s.meta else None
        model = prov.model if prov else "-"
        tokens = (
            f"{prov.tokens.calls} / {prov.tokens.input} / {prov.tokens.output}" if prov else "-"
        )
        verdict = "none stated" if not expect else ("met" if not missed else "**MISSED**")
        recording = s.meta.recording if s.meta else "upstream"
        files = _cell(", ".join(changed)) if changed else "no drift"
        rows.append(
            f"| {_cell(s.name)} | {_cell(recording)} | {_cell(model)} | {tokens} "
            f"| {verdict} | {files} |"
        )
        rows.extend(f"|  | | | | {_cell(m)} | |" for m in missed)
    head = [
        f"## Live re-record: {drifted} of {len(scenarios)} scenarios drifted",
        "",
        "Drift: fixture files that differ from the committed ones (snapshot.yml aside). "
        "The new fixtures are in this run's `snapshots-recorded` artifact.",
        "",
        "| scenario | recording | model | calls / tokens in / out | expectations | drifted files |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join([*head, *rows]) + "\n", all_met


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[Path("snapshots")])
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        text, all_met = report(discover(args.paths))
    except NotInGitError as exc:
        print(f"record_drift: {exc}", file=sys.stderr)
        return 2
    target = args.output or (
        Path(os.environ["GITHUB_STEP_SUMMARY"]) if os.environ.get("GITHUB_STEP_SUMMARY") else None
    )
    if target is None:
        sys.stdout.write(text)
    else:
        with target.open("a", encoding="utf-8") as handle:
            handle.write(text)
        sys.stdout.write(text)
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())

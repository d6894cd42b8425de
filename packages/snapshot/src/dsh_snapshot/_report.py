"""The HTML report of a gate run (``dsh-snapshot replay --html-report FILE``).

One self-contained page: the summary line, pass / fail per scenario, every failure with a
unified diff of the fixture that differs (expected against actual, both normalised), and each
scenario's session tree. CI uploads it as an artifact, so a red gate can be read without
re-running anything.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any, cast

from rich.console import Console

from dsh_core import DshError, ScenarioFiles, dumps_line
from dsh_snapshot._diff import Difference
from dsh_snapshot._discover import BrokenScenario
from dsh_snapshot._engine import summary_line
from dsh_snapshot._fsafe import write_user_file
from dsh_snapshot._harvest import expected_fixtures
from dsh_snapshot._html import page, tree_html
from dsh_snapshot._keyscan import redact_html
from dsh_snapshot._runner import ScenarioResult
from dsh_snapshot._scenario import Scenario
from dsh_snapshot._treeload import load_tree

__all__ = ["add_report_argument", "fixture_diff", "report_page", "write_report_if_asked"]

_DIFF_LINES = 160
_LINE_CHARS = 1200


def add_report_argument(cmd: argparse.ArgumentParser) -> None:
    """``--html-report FILE`` on a gate subcommand."""
    cmd.add_argument(
        "--html-report",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write an HTML report of the run: pass / fail per scenario, the failure "
        "diffs and each scenario's session tree",
    )


def write_report_if_asked(
    ns: argparse.Namespace,
    results: Sequence[ScenarioResult],
    broken: Sequence[BrokenScenario],
    console: Console,
) -> None:
    """Write the report when ``--html-report`` was given, and say where."""
    target = cast(Path | None, getattr(ns, "html_report", None))
    if target is None:
        return
    write_user_file(target, redact_html(report_page(results, broken)).encode("utf-8"))
    console.print(f"HTML report: {target}", highlight=False, markup=False)


def _rows(scenario: Scenario, file: str, result: ScenarioResult) -> tuple[list[Any], list[Any]]:
    """The expected and actual rows of one fixture file of a run."""
    logs, frames = expected_fixtures(scenario)
    if file == scenario.stdout_file.name:
        return frames, result.frames
    index = ScenarioFiles.session_index(file) or 0
    expected = logs[index] if index < len(logs) else []
    actual = result.logs[index] if index < len(result.logs) else []
    return expected, actual


def _clip(line: str) -> str:
    return line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 1] + "…"


def fixture_diff(result: ScenarioResult, difference: Difference) -> str:
    """A unified diff (expected → actual) of the fixture a difference is in, two lines of
    context, at most 160 lines."""
    expected, actual = _rows(result.scenario, difference.file, result)
    lines = list(
        difflib.unified_diff(
            [_clip(dumps_line(r)) for r in expected],
            [_clip(dumps_line(r)) for r in actual],
            fromfile=f"expected/{difference.file}",
            tofile=f"actual/{difference.file}",
            n=2,
            lineterm="",
        )
    )
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], f"… {len(lines) - _DIFF_LINES} more diff lines"]
    return "\n".join(lines)


def _diff_html(text: str) -> str:
    out: list[str] = []
    for line in text.splitlines():
        css = ""
        if line.startswith(("+++", "---")):
            css = "hunk"
        elif line.startswith("+"):
            css = "add"
        elif line.startswith("-"):
            css = "del"
        elif line.startswith("@@"):
            css = "hunk"
        out.append(f'<span class="line {css}">{escape(line)}</span>')
    # Each line is a block of its own: a newline between them would show as an empty line.
    return '<pre class="diff">' + "".join(out) + "</pre>"


def _tree_or_error(scenario: Scenario) -> str:
    try:
        tree = load_tree(scenario.path, "upstream" if scenario.meta is None else "scenario")
    except (DshError, OSError) as exc:
        return f'<p class="note">the session tree cannot be drawn: {escape(str(exc))}</p>'
    return tree_html(tree)


def _badge(ok: bool) -> str:
    return '<span class="badge pass">pass</span>' if ok else '<span class="badge fail">fail</span>'


def _scenario_section(anchor: str, runs: Sequence[ScenarioResult]) -> str:
    scenario = runs[0].scenario
    ok = all(r.ok for r in runs)
    parts = [
        f'<section class="recording{"" if ok else " failed"}" id="{anchor}" '
        f'data-scenario="{escape(scenario.name)}" data-result="{"pass" if ok else "fail"}">',
        f"<h2>{escape(scenario.name)} {_badge(ok)}</h2>",
        f'<div class="path">{escape(str(scenario.path))}</div>',
    ]
    for run in runs:
        if run.ok:
            continue
        parts.append(
            f"<h3>{escape(run.store)}: {len(run.failures)} "
            f"failure{'' if len(run.failures) == 1 else 's'}</h3>"
        )
        parts.append(
            '<ul class="failures">'
            + "".join(f"<li>{escape(f)}</li>" for f in run.failures)
            + "</ul>"
        )
        for difference in run.differences:
            try:
                parts.append(_diff_html(fixture_diff(run, difference)))
            except (DshError, OSError, ValueError) as exc:
                parts.append(f'<p class="note">no diff: {escape(str(exc))}</p>')
    if not ok:
        parts.append(
            '<p class="hint">Read the actual outputs against the expected ones and accept or '
            f"reject them: <code>dsh-snapshot review {escape(str(scenario.path))}</code></p>"
        )
    opened = "" if ok else " open"
    parts.append(
        f"<details{opened}><summary>session tree</summary>{_tree_or_error(scenario)}</details>"
    )
    parts.append("</section>")
    return "".join(parts)


def report_page(
    results: Sequence[ScenarioResult],
    broken: Sequence[BrokenScenario] = (),
    title: str = "dsh-snapshot gate report",
) -> str:
    """The whole report as one HTML document."""
    grouped: dict[Path, list[ScenarioResult]] = {}
    for result in results:
        grouped.setdefault(result.scenario.path, []).append(result)
    rows: list[str] = []
    sections: list[str] = []
    for index, runs in enumerate(grouped.values()):
        anchor = f"scenario-{index}"
        ok = all(r.ok for r in runs)
        backends = ", ".join(r.store for r in runs)
        seconds = sum(r.seconds for r in runs)
        rows.append(
            f'<tr data-result="{"pass" if ok else "fail"}"><td><a href="#{anchor}">'
            f"{escape(runs[0].scenario.name)}</a></td><td>{_badge(ok)}</td>"
            f"<td>{escape(backends)}</td><td>{seconds:.2f}</td></tr>"
        )
        sections.append(_scenario_section(anchor, runs))
    for b in broken:
        rows.append(
            f'<tr data-result="fail"><td>{escape(b.name)}</td><td>{_badge(False)} malformed</td>'
            f"<td colspan=2>{escape(str(b.error))}</td></tr>"
        )
    body = (
        f"<h1>{escape(title)}</h1>\n"
        f'<p class="summary">{escape(summary_line(results, broken))}</p>\n'
        '<table class="results"><thead><tr><th>scenario</th><th>result</th>'
        "<th>store</th><th>seconds</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>\n"
        + "\n".join(sections)
    )
    return page(title, body)

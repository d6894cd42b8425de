"""``dsh-snapshot replay --html-report FILE``: the report of a real gate run with one scenario
broken, read as text (the browser check, ``nox -s html_check``, reads it in Chromium)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html import unescape
from pathlib import Path

import pytest

from dsh_snapshot.cli import main


def _break_tool_result(folder: Path) -> None:
    """The parent's expected tool result says <b>STALE</b>; the child still answers FRESH."""
    log = folder / "session.jsonl"
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    edited = 0
    for row in rows:
        if row["type"] == "tool/result" and row["data"]["content"][0]["text"] == "FRESH":
            row["data"]["content"][0]["text"] = "<b>STALE</b>"
            edited += 1
    assert edited == 1, "subagent-mixed no longer has the tool result this test edits"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_the_report_of_a_failing_run(
    scenario_copy: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = scenario_copy("subagent-mixed")
    scenario_copy("text-turn")
    _break_tool_result(broken)
    target = tmp_path / "out" / "report.html"
    args = ["replay", str(broken.parent), "--composition", "jsonl", "--jobs", "2"]
    assert main([*args, "--html-report", str(target)]) == 1
    assert f"HTML report: {target}" in capsys.readouterr().out
    page = target.read_text(encoding="utf-8")
    assert "2 scenarios (2 runs), 4 sessions, 7 model calls replayed: 1 passed, 1 failed" in page
    assert re.findall(r'<tr data-result="(\w+)"><td><a href="#[^"]+">([^<]+)</a>', page) == [
        ("fail", "sdk/subagent-mixed"),
        ("pass", "sdk/text-turn"),
    ]
    failed = page[page.index('data-scenario="sdk/subagent-mixed"') :]
    failed = failed[: failed.index("</section>")]
    assert 'data-result="fail"' in page
    assert "session.jsonl line 53, field data.content[0].text" in failed
    # The unified diff: the expected line removed, the actual one added, both escaped.
    removed = re.findall(r'<span class="line del">([^<]*)</span>', failed)
    added = re.findall(r'<span class="line add">([^<]*)</span>', failed)
    assert len(removed) == 1
    assert '"text":"<b>STALE</b>"' in unescape(removed[0])
    assert len(added) == 1
    assert '"text":"FRESH"' in unescape(added[0])
    assert "<b>STALE" not in page
    # The failing scenario's tree is open, with its three sessions; the passing one is folded.
    assert "<details open><summary>session tree</summary>" in failed
    assert re.findall(r'data-session="([^"]+)" data-kind="(\w+)"', failed) == [
        ("session.jsonl", "primary"),
        ("session.1.jsonl", "spawn"),
        ("session.2.jsonl", "fork"),
    ]
    assert f"dsh-snapshot review {broken}" in failed
    passed = page[page.index('data-scenario="sdk/text-turn"') :]
    assert "<details><summary>session tree</summary>" in passed


def test_no_report_without_the_option(
    scenario_copy: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = scenario_copy("text-turn")
    assert main(["replay", str(folder), "--composition", "jsonl"]) == 0
    assert "HTML report" not in capsys.readouterr().out
    assert not list(tmp_path.rglob("*.html"))

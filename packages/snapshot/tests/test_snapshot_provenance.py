"""Provenance: usage from the recorded chunks, ``snapshot.yml`` rewriting, list and --max-age."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from dsh_snapshot import load_scenario
from dsh_snapshot._provenance import (
    Provenance,
    TokenTotals,
    Usage,
    live_provenance,
    recording_usage,
    with_provenance,
)


def _rows(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_usage_counts_each_sessions_own_calls_and_never_a_fork_childs_seed(committed: Path) -> None:
    folder = committed / "subagent-fork-in-process"
    parent, child = _rows(folder / "session.jsonl"), _rows(folder / "session.1.jsonl")
    assert child[0]["seedLength"] > 0
    only_parent = recording_usage([parent])
    both = recording_usage([parent, child])
    # The child's seed repeats the parent's turn 1 (with its usage chunk); only its own call
    # is new.
    assert (only_parent.calls, both.calls) == (3, 4)
    own = [r for r in child[1 + child[0]["seedLength"] :] if r["type"] == "assistant/chunk"]
    usage = next(r["data"]["chunk"]["usage"] for r in own if r["data"]["chunk"]["type"] == "usage")
    assert both.input - only_parent.input == usage["inputTokens"]
    assert both.cache_read - only_parent.cache_read == usage["cacheReadTokens"]
    assert recording_usage([]) == Usage()


def test_an_error_finish_counts_as_a_call_and_an_error() -> None:
    header = {"type": "session", "version": 0, "id": "x", "createdAt": 0}
    finish = {"type": "finish", "reason": {"kind": "error"}}
    row = {"type": "assistant/chunk", "data": {"turn": 1, "step": 1, "chunk": finish}}
    assert recording_usage([[header, row, {"type": "other"}, "junk"]]) == Usage(calls=1, errors=1)


_TEXT = """\
# A comment at the top survives.
version: 1
profile: sdk
recording: scripted  # trailing comments on the recording line go
description: "kept"
expect:
  # this comment inside expect stays too
  - prompt: 1
    tools: []
provenance:
  provider: old
# a comment after the old block stays
"""


def _provenance(day: dt.date) -> Provenance:
    settings = type("S", (), {"model": "deepseek-flash", "thinking": "enabled"})()
    return live_provenance(settings, Usage(2, 100, 20, 64, 7), today=day)


def test_a_live_record_rewrites_recording_and_provenance_and_keeps_every_other_line() -> None:
    new = with_provenance(_TEXT, "live", _provenance(dt.date(2026, 11, 30)))
    assert new.startswith("# A comment at the top survives.\nversion: 1\nprofile: sdk\n")
    assert "recording: live\n" in new
    assert "  # this comment inside expect stays too\n" in new
    assert "# a comment after the old block stays\n" in new
    assert "provider: old" not in new
    doc = yaml.safe_load(new)
    assert doc["provenance"] == {
        "provider": "deepseek",
        "model": "deepseek-flash",
        "thinking": "enabled",
        "dshVersion": doc["provenance"]["dshVersion"],
        "recordedAt": "2026-11-30",
        "tokens": {"calls": 2, "input": 100, "output": 20, "cacheRead": 64, "reasoning": 7},
    }
    # Rewriting is idempotent; a scripted re-record drops the (now untrue) provenance.
    assert with_provenance(new, "live", _provenance(dt.date(2026, 11, 30))) == new
    scripted = with_provenance(new, "scripted", None)
    assert "provenance" not in scripted
    assert "recording: scripted\n" in scripted


def _stamp(folder: Path, days_ago: int, model: str) -> None:
    meta = folder / "snapshot.yml"
    day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=days_ago)
    provenance = Provenance(
        provider="deepseek",
        model=model,
        dshVersion="0.1.0",
        recordedAt=day,
        tokens=TokenTotals(calls=1, input=1, output=1, cacheRead=0, reasoning=0),
    )
    meta.write_text(with_provenance(meta.read_text(), "live", provenance))
    assert load_scenario(folder).meta is not None


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("dsh-snapshot")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_list_shows_model_and_age_and_max_age_fails_on_an_older_recording(
    scenario_copy: Callable[[str], Path],
) -> None:
    fresh, old = scenario_copy("text-turn"), scenario_copy("multi-turn")
    _stamp(fresh, 3, "deepseek-flash")
    _stamp(old, 40, "deepseek-v4-pro")
    root = str(fresh.parent)
    listed = _cli("list", root)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "sdk/multi-turn" in line)
    assert "deepseek-v4-pro" in row
    assert "40 days" in row
    assert _cli("list", "--max-age", "60", root).returncode == 0
    stale = _cli("list", "--max-age", "30", root)
    assert stale.returncode == 1
    assert "sdk/multi-turn was recorded 40 days ago" in stale.stdout
    assert "sdk/text-turn was" not in stale.stdout


def test_a_bad_provenance_block_names_the_field(scenario_copy: Callable[[str], Path]) -> None:
    folder = scenario_copy("text-turn")
    meta = folder / "snapshot.yml"
    meta.write_text(meta.read_text() + "provenance:\n  provider: deepseek\n  modle: x\n")
    result = _cli("list", str(folder))
    assert result.returncode == 2
    assert "snapshot.yml: field 'provenance.model': Field required" in result.stdout

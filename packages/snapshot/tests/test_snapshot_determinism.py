"""Determinism for an agent we did not write, on both sides of every comparison.

The agent (``tests/agents/worldly_agent.py``) puts its cwd, ``HOME``, ``TMPDIR``, today's date
and a random build id into its system prompt and tool results, times its answers, sends a
notification at a random position, and uses a tool and a sub-agent of its own. Recorded
against the scripted model server, it must replay green on both stores from another cwd and a
day later, and red when its system prompt or a tool answer changes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_snapshot import SnapshotSettings, load_scenario, run_scenario
from dsh_snapshot._determinism import (
    IGNORED,
    ClockUnavailableError,
    clock_command,
    ignore_fields,
    order_free,
    without_updates,
)
from dsh_snapshot._scenario import ScenarioError

AGENT = Path(__file__).parent / "agents" / "worldly_agent.py"
CLOCK = "2026-01-15T09:00:00"
CLI = "import sys; from dsh_snapshot.cli import main; sys.exit(main(sys.argv[1:]))"
META = f"""\
version: 1
profile: foreign
recording: scripted
agent: ["{{python}}", "{{scenario}}/agent.py"]
agent_env:
  OPENAI_API_KEY: "placeholder"
scrub:
  - pattern: 'build-[0-9a-f]{{8}}'
    placeholder: '{{{{build}}}}'
ignore_fields: ["_meta.durationMs"]
unordered_updates: ["available_commands_update"]
clock: "{CLOCK}"
secrets_allowlist: []
"""


def _text(text: str) -> dict[str, Any]:
    chunks = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    return {"chunks": chunks}


def _tool(call_id: str, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    args = json.dumps(arguments)
    chunks = [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {"type": "tool-call-delta", "index": 0, "id": call_id, "name": name, "argumentsDelta": ""},
        {"type": "tool-call-delta", "index": 0, "id": call_id, "argumentsDelta": args},
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "tool-call", "id": call_id, "name": name, "arguments": args},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    return {"chunks": chunks}


def _scenario(root: Path, meta: str = META) -> Path:
    folder = root / "foreign" / "worldly"
    (folder / "workspace").mkdir(parents=True)
    shutil.copy(AGENT, folder / "agent.py")
    (folder / "workspace" / "notes.txt").write_text("hello world", encoding="utf-8")
    (folder / "snapshot.yml").write_text(meta, encoding="utf-8")
    steps = [
        {"op": "initialize"},
        {"op": "newSession"},
        {"op": "prompt", "text": "Read notes.txt, then have a sub-agent count its words."},
    ]
    (folder / "input.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    primary = [
        _tool("call_1", "read_file", {"path": "notes.txt"}),
        _tool("call_2", "task", {"prompt": "Count the words of: hello world"}),
        _text("notes.txt holds two words."),
    ]
    child = [_text("two words")]
    script = {"sessions": [primary, child]}
    (folder / "model.script.json").write_text(json.dumps(script), encoding="utf-8")
    return folder


needs_faketime = pytest.mark.skipif(
    shutil.which("faketime") is None, reason="faketime (Debian package) is not installed"
)
"""CI installs it (.ci/run); without it the clock cannot be fixed, which the test below shows."""


@needs_faketime
@pytest.mark.slow
def test_a_worldly_agent_replays_green_then_red_on_a_changed_prompt_or_tool_answer(
    tmp_path: Path,
) -> None:
    folder = _scenario(tmp_path)
    recorded = run_scenario(load_scenario(folder), SnapshotSettings(mode="record-scripted"))
    assert recorded.ok, recorded.failures
    # Its own tools and sub-agent are no "needs": two sessions, four calls recorded.
    assert recorded.sessions == 2
    assert recorded.usage.calls == 4
    primary = (folder / "session.jsonl").read_text(encoding="utf-8")
    for placeholder in ("{{cwd}}", "{{home}}", "{{tmp}}", "{{build}}", "2026-01-15"):
        assert placeholder in primary
    stdout = (folder / "stdout.expected.jsonl").read_text(encoding="utf-8")
    assert f'"durationMs":"{IGNORED}"' in stdout
    assert str(tmp_path) not in primary + stdout

    # Replay: every run has its own random cwd, home and temp dir (JSONL here, SQLite below).
    replayed = run_scenario(load_scenario(folder), SnapshotSettings(), "jsonl")
    assert replayed.ok, replayed.failures

    # A day later: the gate's whole process tree runs with the clock one day ahead.
    command = [sys.executable, "-c", CLI, "replay", "--store", "sqlite", str(folder)]
    later = subprocess.run(
        ["faketime", "-f", "+1d", *command],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | {"NO_COLOR": "1"},
        timeout=300,
    )
    assert later.returncode == 0, later.stdout + later.stderr

    # Red when the agent's system prompt changes (here: its date, with the clock moved).
    moved = META.replace(CLOCK, "2026-01-16T09:00:00")
    (folder / "snapshot.yml").write_text(moved, encoding="utf-8")
    drifted = run_scenario(load_scenario(folder), SnapshotSettings())
    assert not drifted.ok
    assert any("request drift" in f and "system" in f for f in drifted.failures), drifted.failures

    # Red when a tool answers differently from when it was recorded.
    (folder / "snapshot.yml").write_text(META, encoding="utf-8")
    (folder / "workspace" / "notes.txt").write_text("hello there world", encoding="utf-8")
    changed = run_scenario(load_scenario(folder), SnapshotSettings())
    assert not changed.ok
    assert any("differ from the recording" in f for f in changed.failures), changed.failures


# --- the pieces ---------------------------------------------------------------------------------


def test_ignored_fields_match_their_key_chain_at_any_depth() -> None:
    frame = {
        "result": {"_meta": {"durationMs": 12, "other": 1}, "durationMs": 5},
        "list": [{"_meta": {"durationMs": 3}}],
    }
    assert ignore_fields(frame, ["_meta.durationMs"]) == {
        "result": {"_meta": {"durationMs": IGNORED, "other": 1}, "durationMs": 5},
        "list": [{"_meta": {"durationMs": IGNORED}}],
    }
    assert ignore_fields(frame, []) is frame


def test_order_free_updates_compare_as_a_set() -> None:
    def update(kind: str, n: int) -> dict[str, Any]:
        return {"method": "session/update", "params": {"update": {"sessionUpdate": kind, "n": n}}}

    answer: dict[str, Any] = {"id": 1, "result": {}}
    one = [update("a", 1), update("b", 2), answer, update("b", 3)]
    two = [update("b", 3), update("a", 1), answer, update("b", 2)]
    assert order_free(one, ["b"]) == order_free(two, ["b"])
    assert order_free(one, ["b"])[:2] == [update("a", 1), answer]
    assert order_free(one, []) == one


def test_ignored_updates_are_left_out_wherever_and_whether_they_came() -> None:
    def update(kind: str) -> dict[str, Any]:
        return {"method": "session/update", "params": {"update": {"sessionUpdate": kind}}}

    answer: dict[str, Any] = {"id": 1, "result": {}}
    came = [update("a"), update("commands"), answer, update("commands")]
    assert without_updates(came, ["commands"]) == [update("a"), answer]
    assert without_updates([update("a"), answer], ["commands"]) == [update("a"), answer]
    assert without_updates(came, []) == came


def test_the_clock_needs_libfaketime(monkeypatch: pytest.MonkeyPatch) -> None:
    assert clock_command(None, ["agent"]) == ["agent"]
    monkeypatch.setattr("dsh_snapshot._determinism._LIBRARY_GLOBS", ("/nonexistent/*.so",))
    with pytest.raises(ClockUnavailableError, match="apt-get install faketime"):
        clock_command(CLOCK, ["agent"])


@pytest.mark.parametrize(
    ("lines", "field", "message"),
    [
        ("scrub: [{pattern: '(', placeholder: '{{x}}'}]\n", "scrub.0.pattern", "not a regular"),
        ("scrub: [{pattern: 'a*', placeholder: '{{x}}'}]\n", "scrub.0.pattern", "empty string"),
        ("scrub: [{pattern: '(a)\\1', placeholder: '{{x}}'}]\n", "scrub.0.pattern", "RE2"),
        ("scrub: [{pattern: 'a', placeholder: 'x'}]\n", "scrub.0.placeholder", "should match"),
        ("scrub: [{pattern: 'a'}]\n", "scrub.0.placeholder", "Field required"),
        ("ignore_fields: ['a..b']\n", "ignore_fields.0", "should match"),
        ("unordered_updates: ['not a kind']\n", "unordered_updates.0", "should match"),
        ("clock: tomorrow\n", "clock", "not an ISO date"),
        ("clock: '2026-01-15T09:00:00+02:00'\n", "clock", "without a zone"),
    ],
)
def test_bad_determinism_fields_name_the_file_and_field(
    tmp_path: Path, lines: str, field: str, message: str
) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "snapshot.yml").write_text(
        "version: 1\nprofile: foreign\nrecording: scripted\n" + lines, encoding="utf-8"
    )
    (folder / "input.json").write_text('{"steps": []}', encoding="utf-8")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(folder)
    text = str(caught.value)
    assert "snapshot.yml" in text
    assert field in text
    assert re.search(message, text), text

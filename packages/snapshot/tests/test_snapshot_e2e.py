"""End to end: committed scenarios through the real dsh-acp-agent subprocess."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core.testing import corpus_unavailable, upstream_corpus
from dsh_snapshot import Allowances, SnapshotSettings, WarmAgents, load_scenario, run_scenario

pytestmark = pytest.mark.e2e


def _rewrite_line(path: Path, line: int, old: str, new: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new)
    path.write_text("".join(lines), encoding="utf-8")


def test_committed_scenario_replays_green_on_both_backends(
    scenario_copy: Callable[[str], Path],
) -> None:
    folder = scenario_copy("tool-call-turn")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    for persistence in ("jsonl", "sqlite"):
        result = run_scenario(load_scenario(folder), SnapshotSettings(), persistence)
        assert result.ok, result.failures
        assert (result.sessions, result.calls_replayed) == (1, 2)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # replay is read-only


def test_broken_fixture_goes_red_naming_file_line_and_field(
    scenario_copy: Callable[[str], Path],
) -> None:
    folder = scenario_copy("text-turn")
    _rewrite_line(folder / "session.jsonl", 3, "Reply with exactly", "Reply with roughly")
    stdout = folder / "stdout.expected.jsonl"
    last = len(stdout.read_text(encoding="utf-8").splitlines())
    _rewrite_line(stdout, last, '"end_turn"', '"cancelled"')
    result = run_scenario(load_scenario(folder))
    assert not result.ok
    assert [str(d) for d in result.differences] == [
        'session.jsonl line 3, field data.content[0].text: expected "Reply with roughly the '
        'word: PONG. Do not use any tools.", actual "Reply with exactly the word: PONG. Do not '
        'use any tools."',
        f'stdout.expected.jsonl line {last}, field result.stopReason: expected "cancelled", '
        'actual "end_turn"',
    ]


def test_refresh_rewrites_outputs_and_is_byte_stable(
    scenario_copy: Callable[[str], Path],
) -> None:
    folder = scenario_copy("multi-turn")
    stdout = folder / "stdout.expected.jsonl"
    original = stdout.read_bytes()
    log = (folder / "session.jsonl").read_bytes()
    stdout.write_text('{"jsonrpc":"2.0","id":1,"result":{}}\n')
    result = run_scenario(load_scenario(folder), SnapshotSettings(mode="refresh"))
    assert result.ok, result.failures
    assert result.written == ["stdout.expected.jsonl"]
    assert stdout.read_bytes() == original
    assert (folder / "session.jsonl").read_bytes() == log
    assert not list(folder.glob(".*.tmp"))  # atomic writes leave no temp files behind
    (folder / "notes.txt").write_text("Authorization: Bearer abcdefghijklmnopqrstuvwxyz\n")
    flagged = run_scenario(load_scenario(folder), SnapshotSettings(mode="refresh"))
    assert len(flagged.failures) == 1
    assert flagged.failures[0].startswith(
        f"key scan: {folder / 'notes.txt'}:1: looks like a bearer token (value masked: "
    )
    assert "abcdefghijklmnopqrstuvwxyz" not in flagged.failures[0]


def test_scripted_record_reproduces_the_committed_recording(
    scenario_copy: Callable[[str], Path],
) -> None:
    folder = scenario_copy("text-turn")
    committed = {n: (folder / n).read_bytes() for n in ("session.jsonl", "stdout.expected.jsonl")}
    (folder / "stdout.expected.jsonl").unlink()
    (folder / "session.jsonl").write_text('{"type":"session","version":0,"id":"x","createdAt":1}\n')
    (folder / "session.1.jsonl").write_text("stale child\n")
    meta = folder / "snapshot.yml"
    meta.write_text(meta.read_text().replace("recording: scripted", "recording: live"))
    result = run_scenario(load_scenario(folder), SnapshotSettings(mode="record-scripted"))
    assert result.ok, result.failures
    assert {n: (folder / n).read_bytes() for n in committed} == committed
    assert not (folder / "session.1.jsonl").exists()
    assert "recording: scripted\n" in meta.read_text()
    assert "-session.1.jsonl" in result.written


@pytest.mark.slow  # >= 2.5 s: nox -s tests_slow (the test command's 4-minute budget)
def test_a_stuck_agent_is_a_clear_timeout_not_a_hang(
    scenario_copy: Callable[[str], Path],
) -> None:
    folder = scenario_copy("cancel")
    steps = json.loads((folder / "input.json").read_text())
    steps["steps"][-1]["op"] = "prompt"  # the hang override never finishes a plain prompt
    (folder / "input.json").write_text(json.dumps(steps))
    result = run_scenario(load_scenario(folder), SnapshotSettings(timeout=3))
    assert not result.ok
    assert result.failures[0].startswith(
        "AgentError: timed out after 3s waiting for the response to session/prompt (id 3)"
    )


def test_cli_replay_prints_summary_and_fails_on_any_failure(
    scenario_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    good = scenario_copy("text-turn")
    bad = scenario_copy("error-finish")
    _rewrite_line(bad / "stdout.expected.jsonl", 3, "HTTP 401", "HTTP 403")
    exe = Path(sys.executable).with_name("dsh-snapshot")
    proc = subprocess.run(
        [str(exe), "replay", str(good), str(bad), "--store", "jsonl", "--jobs", "2"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "2 scenarios (2 runs), 2 sessions, 2 model calls replayed: 1 passed, 1 failed" in (
        proc.stdout
    )
    assert "stdout.expected.jsonl line 3, field error.message" in proc.stdout


def test_upstream_folder_replays_with_only_the_documented_allowances() -> None:
    corpus = upstream_corpus(__file__)
    if corpus is None or not (corpus / "june" / "subagent-spawn").is_dir():
        corpus_unavailable("no upstream corpus found (set DSH_UPSTREAM_CORPUS)")
    scenario = load_scenario(corpus / "june" / "subagent-spawn")
    assert scenario.meta is None
    assert run_scenario(scenario).ok  # upstream folder: UPSTREAM_ALLOWANCES by default
    strict = run_scenario(scenario, SnapshotSettings(allowances=Allowances()))
    assert not strict.ok
    fields = {d.field for d in strict.differences}
    # Exactly the differences COMPATIBILITY.md lists, nothing else.
    assert fields == {"result.agentInfo.name", "origin"}, strict.failures


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_replayed_commands_run_sandboxed_without_network(
    scenario_copy: Callable[[str], Path], tmp_path: Path, warm: bool
) -> None:
    # A scenario whose recorded command writes outside the run and calls a loopback server:
    # in replay the write is refused, the server is unreachable, and only the output differs.
    folder = scenario_copy("tool-call-turn")
    outside = tmp_path / "outside"
    outside.mkdir()
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        hostile = f"touch {outside}/escaped; curl -sS -m 2 http://127.0.0.1:{port}/; echo SNAPSH"
        log = folder / "session.jsonl"
        text = log.read_text(encoding="utf-8")
        assert text.count('\\"echo SNAPSH') == 4  # the delta, block-end, tool/call, message
        log.write_text(text.replace('\\"echo SNAPSH', f'\\"{hostile}'), encoding="utf-8")
        # Warm: the agent is forked from a pre-imported server; its bash is confined the same.
        with WarmAgents(1) as agents:
            result = run_scenario(load_scenario(folder), agents=agents if warm else None)
    assert not (outside / "escaped").exists()
    shown = "\n".join(str(d) for d in result.differences)
    assert "touch: cannot touch" in shown
    # The host's /tmp (where `outside` lies) is hidden inside the sandbox (the difference above
    # shortens long lines: the whole message is in the logs).
    refused = f"touch: cannot touch '{outside}/escaped': No such file or directory"
    assert refused in json.dumps(result.logs)
    # could not connect (a reachable server answers differently); stderr comes after stdout
    # in the result, past the part a difference shows
    assert "curl: (7)" in json.dumps(result.logs)

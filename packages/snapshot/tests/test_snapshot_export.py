"""``dsh-snapshot export --upstream june``: every committed scenario exports to upstream's June
layout and spelling, and an exported folder replays green as an upstream recording."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from dsh_core import read_log_text
from dsh_snapshot import SnapshotSettings, load_scenario, run_scenario
from dsh_snapshot._export import JUNE_AGENT_INFO, run_export
from dsh_snapshot._scenario import is_upstream_recording
from dsh_snapshot.cli import main

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = sorted(p.name for p in (ROOT / "snapshots" / "sdk").iterdir() if p.is_dir())


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_committed_scenario_exports_in_junes_layout_and_spelling(
    committed: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = committed / name
    out = tmp_path / name
    assert main(["export", "--upstream", "june", str(source), str(out)]) == 0
    assert f"exported sdk/{name} -> {out}" in capsys.readouterr().out
    ours = load_scenario(source)
    expected = {"input.json", "stdout.golden.jsonl", *(p.name for p in ours.session_files)}
    expected |= {"replay.override.json"} if ours.override_file else set()
    expected |= {"workspace"} if ours.workspace else set()
    assert {p.name for p in out.iterdir()} == expected
    assert (out / "input.json").read_bytes() == (source / "input.json").read_bytes()
    assert is_upstream_recording(out)
    assert load_scenario(out).meta is None

    for log in ours.session_files:
        text = (out / log.name).read_text(encoding="utf-8")
        assert "{{session:" not in text
        assert "{{sessionId}}" in text
        rows = _rows(out / log.name)
        header = rows[0]
        assert "origin" not in header
        assert "delegationDepth" not in header
        assert [r["seq"] for r in rows[1:]] == list(range(len(rows) - 1))
        assert all(r["type"] != "request/header" for r in rows[1:])
        exported = read_log_text(text)
        original = read_log_text(log.read_text(encoding="utf-8"))
        kept = [(e.type, e.data) for e in original.events if e.type != "request/header"]
        assert [(e.type, e.data) for e in exported.events] == kept
        seed_length = exported.header.seed_length
        if seed_length:  # a fork child's boundary: its last inherited turn/end
            assert exported.events[seed_length - 1].type == "turn/end"

    golden = out / "stdout.golden.jsonl"
    assert "{{session:" not in golden.read_text(encoding="utf-8")
    frames = _rows(golden)
    assert len(frames) == len(_rows(ours.stdout_file))
    assert frames[0]["result"]["agentInfo"] == JUNE_AGENT_INFO


@pytest.mark.parametrize("name", ["text-turn", "subagent-spawn", "subagent-fork-in-process"])
def test_an_exported_scenario_replays_green_as_an_upstream_recording(
    committed: Path, tmp_path: Path, name: str
) -> None:
    out = tmp_path / name
    assert run_export(committed / name, out, io.StringIO()) == 0
    result = run_scenario(load_scenario(out), SnapshotSettings(stores=("jsonl",)))
    assert result.ok, result.failures


def test_a_current_loop_scenario_is_exported_with_a_note(committed: Path, tmp_path: Path) -> None:
    err = io.StringIO()
    assert run_export(committed / "subagent-parallel", tmp_path / "p", err) == 0
    assert "runs the 'current' loop" in err.getvalue()


def test_request_header_inside_a_seed_moves_the_seed_boundary(tmp_path: Path) -> None:
    scenario = tmp_path / "fork"
    scenario.mkdir()
    (scenario / "input.json").write_text('{"steps":[{"op":"initialize"}]}')
    (scenario / "snapshot.yml").write_text("version: 1\nprofile: sdk\nrecording: scripted\n")
    (scenario / "stdout.expected.jsonl").write_text('{"jsonrpc":"2.0","id":1,"result":{}}\n')
    start = {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}
    rows: list[dict[str, Any]] = [
        {"type": "session", "version": 0, "id": "{{session:1}}", "createdAt": 0,
         "parentSession": "{{session:0}}", "seedLength": 3, "origin": "subagent",
         "delegationDepth": 1},
        {"type": "turn/start", "seq": 0, "time": 0, "data": start},
        {"type": "request/header", "seq": 1, "time": 0, "data": {"model": "m"}},
        {"type": "turn/end", "seq": 2, "time": 0, "data": {"turn": 1, "reason": {}}},
        {"type": "turn/start", "seq": 3, "time": 0, "data": {**start, "turn": 2}},
        {"type": "request/header", "seq": 4, "time": 0, "data": {"model": "m"}},
    ]  # fmt: skip
    (scenario / "session.jsonl").write_text(json.dumps(rows[0] | {"id": "{{session:0}}"}) + "\n")
    (scenario / "session.1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_export(scenario, tmp_path / "out", io.StringIO()) == 0
    exported = _rows(tmp_path / "out" / "session.1.jsonl")
    assert exported[0] == {
        "type": "session", "version": 0, "id": "{{sessionId}}", "createdAt": 0,
        "parentSession": "{{sessionId}}", "seedLength": 2,
    }  # fmt: skip
    assert [(r["type"], r["seq"]) for r in exported[1:]] == [
        ("turn/start", 0),
        ("turn/end", 1),
        ("turn/start", 2),
    ]


def test_export_refuses_a_non_empty_target_and_a_non_scenario(
    committed: Path, tmp_path: Path
) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("keep")
    err = io.StringIO()
    assert run_export(committed / "text-turn", busy, err) == 2
    assert err.getvalue().count("\n") == 1
    assert f"{busy} exists and is not an empty folder" in err.getvalue()
    assert [p.name for p in busy.iterdir()] == ["x"]
    err = io.StringIO()
    assert run_export(tmp_path, tmp_path / "out", err) == 2
    assert "input.json missing" in err.getvalue()
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["override", "workspace"])
def test_export_never_carries_a_file_from_outside_through_a_link(
    scenario_copy: Any, tmp_path: Path, where: str
) -> None:
    """Red team 4 F15: the export followed ``replay.override.json -> ~/.config/git/credentials``
    and copied an absolute workspace link as it was, for upstream's harness to follow."""
    folder: Path = scenario_copy("text-turn")
    secret = tmp_path / "credentials"
    secret.write_text("https://user:not-a-real-token@example.com\n")
    if where == "override":
        (folder / "replay.override.json").symlink_to(secret)
    else:
        (folder / "workspace").mkdir(exist_ok=True)
        (folder / "workspace" / "creds").symlink_to(secret)
    out = tmp_path / "out"
    err = io.StringIO()
    assert run_export(folder, out, err) == 2
    assert err.getvalue().count("\n") == 1
    assert "link" in err.getvalue()
    copied = [p for p in out.rglob("*")] if out.exists() else []
    assert all("not-a-real-token" not in p.read_text() for p in copied if p.is_file())
    assert not any(p.is_symlink() for p in copied)

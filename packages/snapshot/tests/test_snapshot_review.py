"""Pending outputs of a failing replay, ``dsh-snapshot review`` (in a real pseudo-terminal)
and ``dsh-snapshot accept``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

from dsh_snapshot import SnapshotSettings, load_scenario, run_scenario, scan_folder
from dsh_snapshot._pending import MANIFEST, load_pending
from dsh_snapshot._scenario import AllowEntry
from dsh_snapshot.cli import main

STDOUT = "stdout.expected.jsonl"


def _break_stdout(folder: Path) -> bytes:
    """Change one expected stdout frame's text; returns the committed (correct) bytes."""
    path = folder / STDOUT
    original = path.read_bytes()
    lines = original.decode("utf-8").splitlines(keepends=True)
    for index, line in enumerate(lines):
        frame = json.loads(line)
        content = frame.get("params", {}).get("update", {}).get("content")
        if isinstance(content, dict) and "text" in content:
            content["text"] = "NOT WHAT THE AGENT SAID"
            lines[index] = json.dumps(frame, separators=(",", ":")) + "\n"
            break
    path.write_text("".join(lines), encoding="utf-8")
    return original


@pytest.fixture
def failed(scenario_copy: Callable[[str], Path]) -> Callable[[str], tuple[Path, bytes]]:
    """A copy of a committed scenario whose expected stdout was changed, replayed once with
    JSONL (so it failed and kept its pending outputs)."""

    def make(name: str) -> tuple[Path, bytes]:
        folder = scenario_copy(name)
        original = _break_stdout(folder)
        result = run_scenario(load_scenario(folder), SnapshotSettings())
        assert not result.ok
        return folder, original

    return make


def test_a_failing_replay_keeps_what_refresh_would_write_and_a_pass_clears_it(
    failed: Callable[[str], tuple[Path, bytes]],
) -> None:
    folder, original = failed("text-turn")
    [pending] = load_pending(load_scenario(folder))
    assert (pending.store, pending.acceptable) == ("jsonl", True)
    assert pending.files[STDOUT].encode("utf-8") == original
    assert pending.files["session.jsonl"] == (folder / "session.jsonl").read_text("utf-8")
    assert any(f.startswith("stdout differs: stdout.expected.jsonl line") for f in pending.failures)
    (folder / STDOUT).write_bytes(original)
    assert run_scenario(load_scenario(folder), SnapshotSettings()).ok
    assert not (folder / ".pending").exists()


def test_accept_publishes_the_pending_outputs_for_every_failed_backend(
    scenario_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = scenario_copy("subagent-spawn")
    original = _break_stdout(folder)
    backends = ["--store", "jsonl,sqlite"]
    assert main(["replay", "--jobs", "1", *backends, str(folder)]) == 1
    assert sorted(p.name for p in (folder / ".pending").iterdir()) == ["jsonl", "sqlite"]
    capsys.readouterr()
    assert main(["accept", str(folder)]) == 0
    assert "sdk/subagent-spawn: accepted (stdout.expected.jsonl)" in capsys.readouterr().out
    assert (folder / STDOUT).read_bytes() == original
    assert not (folder / ".pending").exists()
    assert main(["replay", "--jobs", "1", str(folder)]) == 0


def test_accept_refuses_pending_outputs_whose_inputs_changed_since(
    failed: Callable[[str], tuple[Path, bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _ = failed("text-turn")
    before = (folder / STDOUT).read_bytes()
    with (folder / "session.jsonl").open("a", encoding="utf-8") as log:
        log.write("\n")
    capsys.readouterr()
    assert main(["accept", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "not accepted: session.jsonl changed since the failing replay (jsonl)" in out
    assert (folder / STDOUT).read_bytes() == before


def test_accept_refuses_a_run_that_went_wrong_beyond_its_outputs(
    failed: Callable[[str], tuple[Path, bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _ = failed("text-turn")
    manifest_path = folder / ".pending" / "jsonl" / MANIFEST
    manifest = json.loads(manifest_path.read_text("utf-8"))
    manifest |= {"acceptable": False, "failures": ["assert_consumed: 1 call never made"]}
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    capsys.readouterr()
    assert main(["accept", str(folder)]) == 1
    assert "went wrong beyond its outputs (assert_consumed: 1 call never made)" in (
        capsys.readouterr().out.replace("\n", " ")
    )


def test_accept_runs_the_same_key_scan_as_refresh(
    failed: Callable[[str], tuple[Path, bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _ = failed("text-turn")
    before = (folder / STDOUT).read_bytes()
    pending = folder / ".pending" / "jsonl" / STDOUT
    key = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    pending.write_text(pending.read_text("utf-8").replace("{{session:0}}", key, 1), "utf-8")
    capsys.readouterr()
    assert main(["accept", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "the key scan flagged" in out
    assert key not in out
    assert (folder / STDOUT).read_bytes() == before
    assert (folder / ".pending" / "jsonl").is_dir()  # kept for another look


def test_accept_and_review_say_when_nothing_is_pending_or_no_scenario_is_there(
    scenario_copy: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = scenario_copy("text-turn")
    assert main(["accept", str(folder)]) == 1
    assert "sdk/text-turn: nothing pending to accept" in capsys.readouterr().out
    assert main(["review", str(folder)]) == 0
    assert "nothing pending: every replay passed" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["accept", str(empty)]) == 1
    assert "no scenarios (folders holding input.json) under" in capsys.readouterr().out


def _review(root: Path, columns: int) -> pexpect.spawn[str]:
    exe = Path(sys.executable).with_name("dsh-snapshot")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    child: pexpect.spawn[str] = pexpect.spawn(
        str(exe),
        ["review", str(root)],
        dimensions=(50, columns),
        env=env | {"TERM": "xterm"},
        encoding="utf-8",
        timeout=60,
    )
    return child


def test_review_in_a_pseudo_terminal_accepts_rejects_and_skips(
    failed: Callable[[str], tuple[Path, bytes]],
) -> None:
    spawn_dir, spawn_original = failed("subagent-spawn")
    text_dir, _ = failed("text-turn")
    tool_dir, _ = failed("tool-call-turn")
    child = _review(spawn_dir.parent, 200)
    # Wide terminal: side by side, expected on the left, actual on the right.
    child.expect("sdk/subagent-spawn")
    child.expect("expected")
    child.expect("actual")
    child.expect(r"\[a/r/s/q\]")
    child.sendline("a")
    child.expect(r"accepted \(stdout\.expected\.jsonl\)")
    child.expect("sdk/text-turn")
    child.expect(r"\[a/r/s/q\]")
    child.sendline("r")
    child.expect(r"rejected \(pending outputs dropped\)")
    child.expect("sdk/tool-call-turn")
    child.expect(r"\[a/r/s/q\]")
    child.sendline("s")
    child.expect("1 accepted, 1 rejected, 1 skipped")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (spawn_dir / STDOUT).read_bytes() == spawn_original
    assert not (spawn_dir / ".pending").exists()
    assert not (text_dir / ".pending").exists()
    assert "NOT WHAT THE AGENT SAID" in (text_dir / STDOUT).read_text("utf-8")
    assert (tool_dir / ".pending" / "jsonl" / MANIFEST).is_file()


def test_review_in_a_narrow_terminal_shows_a_unified_diff_and_quits(
    failed: Callable[[str], tuple[Path, bytes]],
) -> None:
    folder, _ = failed("text-turn")
    child = _review(folder, 100)
    child.expect(r"--- stdout\.expected\.jsonl \(expected\)")
    child.expect(r"\+\+\+ stdout\.expected\.jsonl \(actual\)")
    child.expect("NOT WHAT THE AGENT SAID")
    child.expect(r"\[a/r/s/q\]")
    child.sendline("q")
    child.expect("0 accepted, 0 rejected, 1 skipped")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (folder / ".pending" / "jsonl" / MANIFEST).is_file()


def test_the_key_scan_covers_pending_outputs_under_the_fixtures_allow_list(
    tmp_path: Path,
) -> None:
    key = "sk-" + "0123456789abcdef" * 2
    pending = tmp_path / ".pending" / "jsonl"
    pending.mkdir(parents=True)
    (pending / "session.jsonl").write_text(f'{{"text":"{key}"}}\n', encoding="utf-8")
    [finding] = scan_folder(tmp_path)
    assert (finding.file, finding.line) == (".pending/jsonl/session.jsonl", 1)
    allowed = AllowEntry(
        file="session.jsonl", line=1, hash=finding.hash, reason="a reviewed test value"
    )
    assert scan_folder(tmp_path, [allowed], report_stale=False) == []


def test_an_upstream_folder_keeps_no_pending_outputs(scenario_copy: Callable[[str], Path]) -> None:
    folder = scenario_copy("text-turn")
    (folder / "snapshot.yml").unlink()
    (folder / STDOUT).rename(folder / "stdout.golden.jsonl")
    result = run_scenario(load_scenario(folder), SnapshotSettings())
    assert not result.ok  # its fixtures use our session names, upstream's scheme is flat
    assert not (folder / ".pending").exists()

"""``review`` / ``accept`` for a foreign agent's scenario and for a ``dsh-llm-proxy`` recording.

The scenario is ``snapshots/foreign/acp-example``: an ACP agent we did not write, its model call
through ``dsh-llm-proxy``. Only its stdout can change by accepting: in replay the proxy writes
nothing and the session fixtures are the committed recording read back, so a change to its
model calls is made by recording again, and accept says so. A recording the ``llm_proxy``
pytest fixture keeps for one test is no scenario: show and the key scan read it, review says
there is nothing to review in it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

from dsh_core import Chunk
from dsh_scripted_server import ScriptedModelServer
from dsh_snapshot import load_scenario, scan_folder
from dsh_snapshot._pending import MANIFEST, keep_pending, load_pending
from dsh_snapshot.cli import main
from dsh_snapshot.testing import tree_state

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "snapshots" / "foreign" / "acp-example"
STDOUT = "stdout.expected.jsonl"
BACKENDS = ("--store", "jsonl,sqlite")
RERECORD = "record it again: dsh-snapshot record --scripted"

requires_sandbox = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the agent sandbox is bubblewrap (Linux)"
)
pytestmark = requires_sandbox


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of the committed foreign scenario (``foreign/acp-example``)."""
    if not (EXAMPLE / "input.json").is_file():
        pytest.skip(f"{EXAMPLE} is not committed")
    return Path(shutil.copytree(EXAMPLE, tmp_path / "foreign" / "acp-example"))


def _break_answer_frame(folder: Path) -> bytes:
    """Change the text of the first stdout frame carrying the model's answer ("PO" of PONG);
    returns the committed bytes."""
    path = folder / STDOUT
    original = path.read_bytes()
    lines = original.decode("utf-8").splitlines(keepends=True)
    answer = '"text":"PO"'
    for index, line in enumerate(lines):
        if answer in line:
            lines[index] = line.replace(answer, '"text":"NOT WHAT THE AGENT SAID"')
            break
    else:
        raise AssertionError(f"{path}: no frame with the answer's first chunk")
    path.write_text("".join(lines), encoding="utf-8")
    return original


def _replay(folder: Path, *args: str) -> int:
    return main(["replay", "--jobs", "1", *args, str(folder)])


def _out(capsys: pytest.CaptureFixture[str]) -> str:
    return " ".join(capsys.readouterr().out.split())  # rich wraps long lines


@pytest.mark.slow
def test_accept_restores_a_foreign_scenarios_stdout_and_keeps_its_recording(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed_log = (example / "session.jsonl").read_bytes()
    original = _break_answer_frame(example)
    assert _replay(example, *BACKENDS) == 1
    pending = load_pending(load_scenario(example))
    assert [p.store for p in pending] == ["jsonl", "sqlite"]
    for one in pending:
        assert one.acceptable
        assert one.agent == ("{python}", "{scenario}/agent.py")
        assert one.files[STDOUT].encode("utf-8") == original
        # The proxy wrote nothing: the log is the committed recording, read back.
        assert one.files["session.jsonl"].encode("utf-8") == committed_log
    capsys.readouterr()
    assert main(["accept", str(example)]) == 0
    assert "foreign/acp-example: accepted (stdout.expected.jsonl)" in _out(capsys)
    assert (example / STDOUT).read_bytes() == original
    assert (example / "session.jsonl").read_bytes() == committed_log
    assert not (example / ".pending").exists()
    assert _replay(example, *BACKENDS) == 0


@pytest.mark.slow
def test_review_shows_the_foreign_diff_and_says_model_calls_change_by_recording(
    example: Path,
) -> None:
    original = _break_answer_frame(example)
    assert _replay(example, "--store", "jsonl") == 1
    exe = Path(sys.executable).with_name("dsh-snapshot")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    child: pexpect.spawn[str] = pexpect.spawn(
        str(exe),
        ["review", str(example)],
        dimensions=(60, 100),  # narrow: a unified diff
        env=env | {"TERM": "xterm"},
        encoding="utf-8",
        timeout=60,
    )
    child.expect("foreign/acp-example")
    child.expect(r"record --scripted")
    child.expect(r"--- stdout\.expected\.jsonl \(expected\)")
    child.expect(r"\+\+\+ stdout\.expected\.jsonl \(actual\)")
    # The changed frame, wrapped at the terminal's width: expected, then actual.
    child.expect(r'-\{"jsonrpc"')
    child.expect("NOT WHAT THE AGENT SAID")
    child.expect(r'\+\{"jsonrpc"')
    child.expect(r'":"PO","type"')
    child.expect(r"\[a/r/s/q\]")
    child.sendline("a")
    child.expect(r"accepted \(stdout\.expected\.jsonl\)")
    child.expect("1 accepted, 0 rejected, 0 skipped")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (example / STDOUT).read_bytes() == original
    assert _replay(example, "--store", "jsonl") == 0


def test_pending_outputs_are_stale_once_the_agents_own_file_changed(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _break_answer_frame(example)
    broken = (example / STDOUT).read_bytes()
    assert _replay(example, "--store", "jsonl") == 1
    with (example / "agent.py").open("a", encoding="utf-8") as agent:
        agent.write("# edited after the failing replay\n")
    capsys.readouterr()
    assert main(["accept", str(example)]) == 1
    assert "not accepted: agent.py changed since the failing replay (jsonl)" in _out(capsys)
    assert (example / STDOUT).read_bytes() == broken


def test_only_files_inside_the_scenario_count_as_the_agents_inputs(example: Path) -> None:
    (example.parent / "outside.py").write_text("print()\n", encoding="utf-8")
    meta = (example / "snapshot.yml").read_text("utf-8")
    argv = '["{python}", "{scenario}/agent.py", "{scenario}/../outside.py", "{scenario}/"]'
    meta = meta.replace('["{python}", "{scenario}/agent.py"]', argv)
    (example / "snapshot.yml").write_text(meta, encoding="utf-8")
    scenario = load_scenario(example)
    assert keep_pending(scenario, "jsonl", [], [], ["a failure"], True) is not None
    [pending] = load_pending(scenario)
    assert "agent.py" in pending.inputs
    assert not any("outside" in name or name in ("", ".") for name in pending.inputs)


def _edit_recorded_answer(folder: Path, old: str, new: str) -> None:
    """Hand-edit the committed recording's answer (its chunks and the assembled message)."""
    path = folder / "session.jsonl"
    text = path.read_text(encoding="utf-8")
    for before, after in (
        (f'"text":"{old[:2]}"', f'"text":"{new[:2]}"'),
        (f'"text":"{old}"', f'"text":"{new}"'),
    ):
        assert before in text, f"{path}: no {before}"
        text = text.replace(before, after)
    path.write_text(text, encoding="utf-8")


@pytest.mark.slow  # >= 2.5 s: nox -s tests_slow (the test command's 4-minute budget)
def test_a_hand_edited_recording_is_replayed_as_committed_and_accept_keeps_it(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit_recorded_answer(example, "PONG", "PING")
    edited = (example / "session.jsonl").read_bytes()
    assert _replay(example, "--store", "jsonl") == 1
    [pending] = load_pending(load_scenario(example))
    assert pending.acceptable
    assert pending.files["session.jsonl"].encode("utf-8") == edited
    capsys.readouterr()
    assert main(["accept", str(example)]) == 0
    assert "accepted (stdout.expected.jsonl)" in _out(capsys)
    frames = (example / STDOUT).read_text("utf-8")
    assert '"text":"PI"' in frames
    assert '"text":"PO"' not in frames
    assert (example / "session.jsonl").read_bytes() == edited
    assert _replay(example, "--store", "jsonl") == 0


def _changed_prompt(folder: Path, *more: str) -> None:
    """The last prompt of ``input.json`` rephrased (a request-side change), then ``more``."""
    steps = json.loads((folder / "input.json").read_text("utf-8"))
    steps["steps"][-1]["text"] = "Reply with exactly the word: PING."
    steps["steps"] += [{"op": "prompt", "text": text} for text in more]
    (folder / "input.json").write_text(json.dumps(steps), encoding="utf-8")


@pytest.mark.slow
def test_a_changed_request_stops_the_replay_and_accept_takes_it_keeping_the_answer(
    example: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = (example / "session.jsonl").read_text("utf-8").count('"text":"PO"')
    _changed_prompt(example)
    assert _replay(example, "--store", "jsonl") == 1
    out = _out(capsys)
    assert "the request's new messages differ from the recording" in out
    # The failed replay had no outputs to keep, but review says it failed, and why, and
    # offers to accept it (skipped here).
    monkeypatch.setattr("sys.stdin", io.StringIO("s\n"))
    monkeypatch.setenv("COLUMNS", "400")  # the panel's lines unwrapped
    assert main(["review", str(example)]) == 0
    out = _out(capsys)
    assert "every replay passed" not in out
    assert "failed replay (jsonl)" in out
    assert "differ from the recording" in out
    assert "the model is NOT asked again" in out
    # Accept records the new request keylessly, with the recorded answer.
    assert main(["accept", str(example)]) == 0
    out = _out(capsys)
    assert "foreign/acp-example: accepted (session.jsonl, stdout.expected.jsonl)" in out
    assert "the model was NOT asked again (1 changed request(s); first: session" in out
    log = (example / "session.jsonl").read_text("utf-8")
    assert "Reply with exactly the word: PING." in log
    assert log.count('"text":"PO"') == answer  # the recorded answer, not a new one
    assert not (example / ".pending").exists()
    assert _replay(example, "--store", "jsonl") == 0
    assert main(["review", str(example)]) == 0


@pytest.mark.slow
def test_accept_of_a_change_needing_other_calls_writes_nothing(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _changed_prompt(example, "And once more.")  # a call the recording has no answer for
    assert _replay(example, "--store", "jsonl") == 1
    capsys.readouterr()
    before = tree_state(example)
    assert main(["accept", str(example)]) == 1
    out = _out(capsys)
    assert "not accepted: the recorded answers do not fit the new requests" in out
    assert f"{RERECORD} {example}" in out
    assert "nothing was written" in out
    assert tree_state(example) == before


def test_an_unconsumed_recording_is_refused_saying_to_record_again(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = json.loads((example / "input.json").read_text("utf-8"))
    steps["steps"] = [s for s in steps["steps"] if s["op"] != "prompt"]  # no model call
    (example / "input.json").write_text(json.dumps(steps), encoding="utf-8")
    meta = (example / "snapshot.yml").read_text("utf-8")
    (example / "snapshot.yml").write_text(meta[: meta.index("expect:")], encoding="utf-8")
    committed = (example / STDOUT).read_bytes()
    assert _replay(example, "--store", "jsonl") == 1
    [pending] = load_pending(load_scenario(example))
    assert not pending.acceptable
    capsys.readouterr()
    assert main(["accept", str(example)]) == 1
    out = _out(capsys)
    assert "went wrong beyond its outputs (assert_consumed:" in out
    assert f"{RERECORD} {example} (answers from model.script.json)" in out
    assert (example / STDOUT).read_bytes() == committed
    assert (example / ".pending" / "jsonl" / MANIFEST).is_file()


def test_outputs_of_another_agent_than_the_scenarios_own_are_refused(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _break_answer_frame(example)
    broken = (example / STDOUT).read_bytes()
    # The same agent under another command line: what --agent runs is not snapshot.yml's.
    other = "env OPENAI_API_KEY=placeholder {python} {scenario}/agent.py"
    agent_args = ["--agent", other, "--agent-base-url-env", "OPENAI_BASE_URL"]
    assert _replay(example, "--store", "jsonl", *agent_args) == 1
    [pending] = load_pending(load_scenario(example))
    assert pending.acceptable
    assert pending.agent == tuple(other.split())
    capsys.readouterr()
    assert main(["accept", str(example)]) == 1
    out = _out(capsys)
    assert f"ran the agent {other!r}, but the scenario runs the agent" in out
    assert "replay it without --agent and review" in out
    assert (example / STDOUT).read_bytes() == broken


# --- a recording of the llm_proxy pytest fixture ----------------------------------------------

FIXTURE_TEST = """
import os

import openai
import pytest


@pytest.fixture
def llm_proxy_upstream():
    return os.environ["UPSTREAM_URL"]


@pytest.fixture
def llm_proxy_key_env():
    return "UPSTREAM_KEY"


def test_hello(llm_proxy):
    with openai.OpenAI(base_url=llm_proxy, api_key="dummy", max_retries=0) as client:
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.choices[0].message.content == "hello"
"""


def _hello() -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "hello"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hello"}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


@pytest.fixture
def fixture_recording(
    tmp_path: Path, inner_pytest: Callable[..., subprocess.CompletedProcess[str]]
) -> Path:
    """``tests/llm_recordings/test_agent/test_hello``, recorded by a real pytest run of the
    ``llm_proxy`` fixture against the scripted server."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_agent.py").write_text(textwrap.dedent(FIXTURE_TEST), encoding="utf-8")
    key = "upstream-placeholder"
    with ScriptedModelServer([[_hello()]], api_key=key) as upstream:
        env = os.environ | {"UPSTREAM_URL": upstream.base_url, "UPSTREAM_KEY": key}
        run = inner_pytest(tests, "--llm-proxy-mode=once", env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        upstream.assert_consumed()
    folder = tests / "llm_recordings" / "test_agent" / "test_hello"
    assert len(list(folder.glob("*.jsonl"))) == 1
    return folder


def test_a_fixture_recording_is_shown_scanned_and_not_reviewed(
    fixture_recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = fixture_recording.parents[2]
    assert scan_folder(fixture_recording) == []
    assert main(["show", str(tests)]) == 0
    shown = capsys.readouterr().out
    assert "test_hello  (proxy, 1 session)" in shown
    assert 'prompt: "hi"' in shown
    assert 'final: "hello"' in shown
    for command in ("review", "accept"):
        for path in (tests, fixture_recording):
            assert main([command, str(path)]) == 1
            out = _out(capsys)
            assert f"dsh-snapshot {command}: {fixture_recording}: a dsh-llm-proxy recording" in out
            assert "not a scenario: no input.json" in out
            assert "pytest --llm-proxy-mode=record" in out
            assert f"dsh-snapshot show {fixture_recording}" in out
            assert "no scenarios (folders holding input.json)" not in out


def test_review_of_a_folder_with_neither_still_says_no_scenarios(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("nothing recorded here\n", encoding="utf-8")
    assert main(["review", str(tmp_path)]) == 1
    assert "no scenarios (folders holding input.json) under" in _out(capsys)

"""The test double itself: ``AgentProcess`` against small fake agents, for its error paths.

The real agent never misbehaves on purpose, so each fake here does one thing wrong (a stray line,
a request to the client, silence, an early exit, ignoring the end of stdin) and the driver must
say so clearly, with the tail of stderr, instead of hanging.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsh_acp_agent.testing import AgentProcess, AgentProcessError, ResponseError, _process

_FAKE = """
import json, sys, time

mode = sys.argv[1]
print(f"fake: {mode}", file=sys.stderr, flush=True)


def send(frame):
    sys.stdout.write(json.dumps(frame) + "\\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    if mode == "silent":
        continue
    if mode == "quit":
        sys.exit(4)
    if mode == "flood-stderr":  # one 3 MiB write with no newline, then a proper answer
        sys.stderr.write("x" * (3 * 1024 * 1024) + "END-OF-FLOOD")
        sys.stderr.flush()
        send({"jsonrpc": "2.0", "id": request["id"], "result": {}})
        continue
    if mode == "long-line":
        sys.stdout.write("y" * (2 * 1024 * 1024))
        sys.stdout.flush()
        time.sleep(600)
    if mode == "many-lines":
        for _ in range(40000):
            print("z" * 60)
        sys.stdout.flush()
        time.sleep(600)
    if mode == "stubborn":
        send({"jsonrpc": "2.0", "id": request["id"], "result": {}})
        sys.stdin.read()
        time.sleep(600)
    print("not a frame", flush=True)
    send({"jsonrpc": "2.0", "id": "ask-1", "method": "fs/read_text_file", "params": {}})
    refusal = json.loads(sys.stdin.readline())
    params = {"sessionId": "s", "update": refusal}
    send({"jsonrpc": "2.0", "method": "session/update", "params": params})
    if request["method"] == "fail":
        send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": 1, "message": "no"}})
    else:
        send({"jsonrpc": "2.0", "id": request["id"], "result": {"echo": request["method"]}})
"""


def _fake(tmp_path: Path, mode: str, timeout: float = 60.0) -> AgentProcess:
    script = tmp_path / "fake_agent.py"
    script.write_text(_FAKE, encoding="utf-8")
    command = [sys.executable, str(script), mode]
    return AgentProcess({}, tmp_path, command, timeout=timeout, start_timeout=timeout)


def test_driver_keeps_frames_in_order_and_refuses_agent_requests(tmp_path: Path) -> None:
    with _fake(tmp_path, "chatty") as agent:
        request_id = agent.send("ping", {})
        update = agent.next_update(request_id)
        assert update is not None
        assert update["params"]["update"] == {
            "jsonrpc": "2.0",
            "id": "ask-1",
            "error": {"code": -32601, "message": "method not found"},
        }
        assert agent.result(request_id) == {"echo": "ping"}
        with pytest.raises(ResponseError) as failed:
            agent.request("fail", {})
        assert failed.value.error == {"code": 1, "message": "no"}
        assert agent.finish() == 0
    assert [frame.get("method") or frame["id"] for frame in agent.frames] == [
        "fs/read_text_file",
        "session/update",
        1,
        "fs/read_text_file",
        "session/update",
        2,
    ]
    assert agent.stray_lines == ["not a frame\n", "not a frame\n"]
    # A response already waited past is still found.
    assert agent.response(request_id)["result"] == {"echo": "ping"}


def test_driver_next_update_is_none_when_the_response_comes_first(tmp_path: Path) -> None:
    with _fake(tmp_path, "stubborn") as agent:
        assert agent.next_update(agent.send("ping", {})) is None


def test_driver_times_out_with_the_stderr_tail(tmp_path: Path) -> None:
    with _fake(tmp_path, "silent", timeout=0.5) as agent, pytest.raises(AgentProcessError) as err:
        agent.initialize()
    assert str(err.value) == (
        "timed out after 0.5s waiting for the response to initialize (id 1); stderr: fake: silent"
    )


def test_driver_reports_stdout_closed_before_the_answer(tmp_path: Path) -> None:
    with _fake(tmp_path, "quit") as agent, pytest.raises(AgentProcessError) as err:
        agent.request("session/new", {})
    assert str(err.value).startswith("the agent closed stdout (exit code ")
    assert str(err.value).endswith(
        "while waiting for the response to session/new (id 1); stderr: fake: quit"
    )
    assert agent.process.wait(timeout=60) == 4


def test_driver_kills_an_agent_that_does_not_exit_after_stdin_closes(tmp_path: Path) -> None:
    with _fake(tmp_path, "stubborn", timeout=0.5) as agent:
        agent.request("ping", {})
        with pytest.raises(AgentProcessError) as err:
            agent.finish()
        assert agent.process.poll() is not None  # killed, not left running
    assert str(err.value) == (
        "the agent did not exit within 0.5s after stdin closed; stderr: fake: stubborn"
    )


def test_driver_reports_writing_to_an_agent_that_is_gone(tmp_path: Path) -> None:
    with _fake(tmp_path, "quit") as agent:
        agent.notify("bye", {})
        assert agent.process.wait(timeout=60) == 4
        with pytest.raises(AgentProcessError) as err:
            agent.notify("anyone", {})
    assert str(err.value).startswith("the agent closed its stdin (")
    assert str(err.value).endswith("stderr: fake: quit")


def test_driver_keeps_only_the_end_of_a_flood_of_stderr(tmp_path: Path) -> None:
    with _fake(tmp_path, "flood-stderr") as agent:
        assert agent.request("ping", {}) == {}
        agent.finish()
        text = agent.stderr
    kept = _process.STDERR_KEPT_BYTES
    dropped = len("fake: flood-stderr\n") + 3 * 1024 * 1024 + len("END-OF-FLOOD") - kept
    assert text.startswith(f"[{dropped} earlier bytes of stderr dropped]\n")
    assert text.endswith("END-OF-FLOOD")
    assert len(text) < kept + 100


@pytest.mark.parametrize(
    ("mode", "bound", "says"),
    [
        ("long-line", "MAX_FRAME_BYTES", "a stdout line over 1048576 bytes; it was stopped"),
        ("many-lines", "MAX_STDOUT_BYTES", "over 1048576 bytes to stdout; it was stopped"),
    ],
)
def test_driver_stops_an_agent_past_its_stdout_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, bound: str, says: str
) -> None:
    monkeypatch.setattr(_process, bound, 1024 * 1024)
    with _fake(tmp_path, mode) as agent:
        with pytest.raises(AgentProcessError, match=f"{says}, while waiting for"):
            agent.request("ping", {})
        assert agent.process.wait(timeout=30) != 0  # stopped, not left writing

"""Lanes of one fork server: children of several lanes run at once, each lane's alone.

A gate's workers share one server (one interpreter importing the agent) through its lanes. A
child must inherit no lane and no sibling's pidfd (it could ask the server for a process of
its choosing, or signal a sibling), and closing one lane must stop only that lane's child.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from dsh_acp_agent import AgentForkServer, ForkedAgent, ForkServerError

_TESTS = Path(__file__).parent


def _probe_server() -> AgentForkServer:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(_TESTS), *sys.path]))
    return AgentForkServer(entry="fork_probe:main", preload=["fork_probe"], env=env)


def _finish(child: ForkedAgent, word: str) -> tuple[dict[str, object], int]:
    child.stdin.write(f"{word}\n".encode())
    child.stdin.close()
    out = child.stdout.read().decode()
    child.stderr.read()
    code = child.wait(timeout=60)
    child.stdout.close()
    child.stderr.close()
    return json.loads(out), code


def _gone(pid: int, timeout: float = 60.0) -> bool:
    """Whether ``pid`` (a child of the server, reaped by it) has disappeared."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.05)
    return False


def test_lanes_run_children_at_once_and_a_child_inherits_no_lane(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"]}
    with _probe_server() as server:
        lane = server.lane()
        assert lane.process is server.process  # one interpreter
        waiting = server.spawn(tmp_path, env)  # blocks on its stdin...
        other = lane.spawn(tmp_path, env)
        seen, code = _finish(other, "report")  # ...while the other lane's child runs
        assert code == 7
        assert waiting.poll() is None
        first, code = _finish(waiting, "report")
        assert code == 7
        assert seen["pid"] != first["pid"]
        # Nothing beyond the three pipes: no lane socket, no sibling's pidfd.
        assert (seen["inherited"], first["inherited"]) == ([], [])
    assert server.process.poll() == 0  # closing the server closed its lanes, then it exited


def test_closing_a_lane_stops_only_its_child(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"]}
    with _probe_server() as server:
        lane, spare = server.lane(), server.lane()
        doomed = lane.spawn(tmp_path, env)
        kept = spare.spawn(tmp_path, env)
        lane.close()
        assert _gone(doomed.pid)
        for stream in (doomed.stdin, doomed.stdout, doomed.stderr):
            stream.close()
        assert kept.poll() is None
        state, code = _finish(kept, "report")
        assert code == 7
        assert state["cwd"] == str(tmp_path)
        # The server goes on serving: its own lane, and a lane opened now.
        for one in (server, server.lane()):
            state, code = _finish(one.spawn(tmp_path, env), "report")
            assert code == 7


def test_a_lane_still_running_a_child_refuses_a_second(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"]}
    with _probe_server() as server:
        lane = server.lane()
        child = lane.spawn(tmp_path, env)
        with pytest.raises(ForkServerError, match="still running a child"):
            lane.spawn(tmp_path, env)
        child.kill()
        assert child.wait(timeout=60) == -signal.SIGKILL
        for stream in (child.stdin, child.stdout, child.stderr):
            stream.close()


def test_a_lane_of_a_dead_server_is_a_typed_error() -> None:
    server = _probe_server()
    server.process.kill()
    server.process.wait()
    with pytest.raises(ForkServerError, match=r"is gone|opened no lane"):
        server.lane(timeout=60)
    server.close()

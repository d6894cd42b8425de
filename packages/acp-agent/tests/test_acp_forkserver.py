"""The warm agent: a fork server that imports once and forks a fresh process per run.

Every run must still be a process of its own: its own pid, pipes, cwd, environment and temp
dir, and module state that the previous run changed must be pristine again. These tests drive
real fork servers and real forked children (a probe entry, and the real agent).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_acp_agent import AgentForkServer, ForkedAgent, ForkServerError
from dsh_acp_agent.testing import AgentProcess, agent_environment
from dsh_core.plugins import secret_env_names, store_backend

_TESTS = Path(__file__).parent


def _probe_server() -> AgentForkServer:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(_TESTS), *sys.path]))
    return AgentForkServer(entry="fork_probe:main", preload=["fork_probe"], env=env)


def _run_probe(
    server: AgentForkServer, cwd: Path, env: dict[str, str], word: str
) -> tuple[dict[str, Any], str, int]:
    child = server.spawn(cwd, env)
    child.stdin.write(f"{word}\n".encode())
    child.stdin.close()
    out = child.stdout.read().decode()
    err = child.stderr.read().decode()
    code = child.wait(timeout=60)
    child.stdout.close()
    child.stderr.close()
    return json.loads(out), err, code


def test_a_run_that_mutates_everything_leaves_the_next_run_pristine(tmp_path: Path) -> None:
    first_cwd, second_cwd = tmp_path / "one", tmp_path / "two"
    first_cwd.mkdir()
    second_cwd.mkdir()
    first_env = {"PATH": os.environ["PATH"], "TMPDIR": str(first_cwd), "RUN": "one"}
    mark = second_cwd / "atexit-ran"  # in its cwd: the child may write nowhere else
    second_env = {
        "PATH": os.environ["PATH"],
        "TMPDIR": str(second_cwd),
        "RUN": "two",
        "PROBE_ATEXIT_MARK": str(mark),
    }
    with _probe_server() as server:
        mutated, err, code = _run_probe(server, first_cwd, first_env, "mutate")
        assert (code, err.strip()) == (7, "probe mutate done")
        # The mutations took effect in the first child...
        assert mutated["protocol_version"] == 99
        assert mutated["counter"] == 1
        assert mutated["cwd"] == "/"
        assert mutated["env"]["PROBE_LEAK"] == "leaked"
        assert mutated["leaked_module"] is True
        seen, err, code = _run_probe(server, second_cwd, second_env, "report")
    # ...and none of them reached the second: a new process with exactly what it was given.
    assert (code, err.strip()) == (7, "probe report done")
    assert seen["pid"] != mutated["pid"]
    assert seen["cwd"] == str(second_cwd)
    assert seen["env"] == second_env
    assert seen["protocol_version"] == 1
    assert seen["counter"] == 0
    assert seen["leaked_module"] is False
    assert seen["tempdir"] == str(second_cwd)
    assert mark.read_text() == "report"  # exited like an interpreter: atexit handlers ran


def test_the_server_holds_no_key_and_a_child_has_no_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A child's /proc/<pid>/environ is the server's start-up environment, whatever the child
    # then sets: the server must start without the caller's credentials.
    fake = "sk-" + "f" * 8 + "-fork-server-probe"
    for name in (*secret_env_names(), "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, fake)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(_TESTS), *sys.path]))
    with AgentForkServer(entry="fork_probe:main", preload=["fork_probe"]) as server:
        server_environ = Path(f"/proc/{server.process.pid}/environ").read_bytes()
        state, _, code = _run_probe(server, tmp_path, {"PATH": os.environ["PATH"]}, "report")
    assert code == 7
    assert fake.encode() not in server_environ
    assert fake not in state["proc_environ"]
    assert b"PYTHONPATH=" in server_environ  # the rest of the caller's environment is kept
    assert state["session_leader"] is True


def test_a_real_agent_forks_serves_and_reports_its_cost(tmp_path: Path) -> None:
    env = agent_environment(
        {
            "DSH_SESSIONS_ROOT": str(tmp_path / "sessions"),
            # no prompt: the model is never called, so any provider does
            "DSH_MODEL_CLIENT": "openai",
            "OPENAI_API_KEY": "test-key-not-secret",
        }
    )
    with AgentForkServer() as server:
        pids: list[int] = []
        for _ in range(2):
            agent = AgentProcess(env, tmp_path, fork_server=server, timeout=60)
            try:
                assert agent.initialize()["agentInfo"]["name"] == "dsh-acp-agent"
                agent.new_session(tmp_path)
                assert agent.finish() == 0
            finally:
                agent.kill()
            assert isinstance(agent.process, ForkedAgent)
            assert agent.process.cpu_seconds > 0
            assert agent.process.maxrss_kb > 0
            pids.append(agent.process.pid)
        assert pids[0] != pids[1]
        assert server.process.pid not in pids
    assert len(store_backend("jsonl").list_sessions(tmp_path / "sessions")) == 2


def test_a_killed_child_reports_the_signal_and_the_server_forks_again(tmp_path: Path) -> None:
    with _probe_server() as server:
        child = server.spawn(tmp_path, {"PATH": os.environ["PATH"]})
        assert child.poll() is None  # waiting for its word on stdin
        with pytest.raises(ForkServerError, match="still running a child"):
            server.spawn(tmp_path, {})
        child.kill()
        assert child.wait(timeout=60) == -signal.SIGKILL
        child.kill()  # a late kill of a reaped child is harmless
        for stream in (child.stdin, child.stdout, child.stderr):
            stream.close()
        seen, _, code = _run_probe(server, tmp_path, {"PATH": os.environ["PATH"]}, "report")
        assert code == 7
        assert seen["cwd"] == str(tmp_path)


def test_a_child_whose_entry_fails_exits_1_with_the_traceback(tmp_path: Path) -> None:
    with _probe_server() as server:
        # No such cwd: the child cannot become the run it was asked to be.
        child = server.spawn(tmp_path / "missing", {"PATH": os.environ["PATH"]})
        child.stdin.close()
        err = child.stderr.read().decode()
        assert child.wait(timeout=60) == 1
        assert "FileNotFoundError" in err
        child.stdout.close()
        child.stderr.close()


def test_a_server_that_cannot_import_its_entry_is_a_typed_error() -> None:
    with pytest.raises(ForkServerError, match="did not start"):
        AgentForkServer(entry="no_such_module_anywhere:main", preload=[], start_timeout=60)


def test_a_dead_server_is_a_typed_error_not_a_hang(tmp_path: Path) -> None:
    server = _probe_server()
    server.process.kill()
    server.process.wait()
    with pytest.raises(ForkServerError, match=r"is gone|went away"):
        server.spawn(tmp_path, {})
    with pytest.raises(ForkServerError, match="went away"):
        server.receive(60)
    server.close()


def test_modules_in_the_callers_cwd_are_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team 4 F14: ``python -m`` put the gate's cwd (a scenario tree) first on sys.path, so
    a planted ``selectors.py`` ran in the unconfined fork server."""
    marker = tmp_path / "planted-module-ran"
    tree = tmp_path / "snapshots"
    tree.mkdir()
    for name in ("selectors", "json", "signal", "socket"):
        (tree / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    monkeypatch.chdir(tree)
    with _probe_server() as server:
        _, _, code = _run_probe(server, tmp_path, {"PATH": os.environ["PATH"]}, "report")
    assert code == 7
    assert not marker.exists()

"""The warm agent's child confines itself after the fork (SECURITY.md, "The sandbox").

Real fork servers, real forked children, real listeners outside: a pathname Unix socket in
the test's directory and a TCP listener on the host's loopback. Each refusal has its control
(the same probe with the confinement off reaches both), so these tests can fail.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_acp_agent import AgentForkServer, ForkedAgent
from dsh_acp_agent.testing import AgentProcess, agent_environment
from dsh_core import ProcessConfinement, SandboxMechanisms

_TESTS = Path(__file__).parent

pytestmark = pytest.mark.skipif(
    bool(SandboxMechanisms.probe().missing) and os.environ.get("CI") != "true",
    reason=f"no sandbox here: {SandboxMechanisms.probe().missing}",
)


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A pathname Unix socket and a loopback TCP listener, both on the host, both listening;
    as root, also a file of another user that only root's host powers can read."""
    path = tmp_path / "outside.sock"
    foreign: dict[str, str] = {}
    if os.getuid() == 0:
        secret = tmp_path / "another-users-file"
        secret.write_text("not yours")
        secret.chmod(0o600)
        os.chown(secret, 4321, 4321)
        foreign["PROBE_FOREIGN_FILE"] = str(secret)
    with socket.socket(socket.AF_UNIX) as unix, socket.socket() as tcp:
        unix.bind(str(path))
        unix.listen(4)
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(4)
        yield {
            "PROBE_UNIX_SOCKET": str(path),
            "PROBE_TCP_PORT": str(tcp.getsockname()[1]),
            **foreign,
        }


@pytest.fixture(scope="module")
def server() -> Iterator[AgentForkServer]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(_TESTS), *sys.path]))
    with AgentForkServer(entry="fork_probe:main", preload=["fork_probe"], env=env) as started:
        yield started


def _probe(
    server: AgentForkServer, cwd: Path, env: dict[str, str], confinement: ProcessConfinement
) -> tuple[dict[str, Any], str, int]:
    child = server.spawn(cwd, {"PATH": os.environ["PATH"], **env}, confinement=confinement)
    child.stdin.write(b"confinement\n")
    child.stdin.close()
    out, err = child.stdout.read().decode(), child.stderr.read().decode()
    code = child.wait(timeout=60)
    child.stdout.close()
    child.stderr.close()
    return (json.loads(out) if out else {}), err, code


def test_a_replay_child_reaches_no_socket_no_network_and_no_terminal(
    server: AgentForkServer, outside: dict[str, str], tmp_path: Path
) -> None:
    strict = ProcessConfinement(network=False, mode="strict")
    seen, err, code = _probe(server, tmp_path, outside, strict)
    assert (code, err) == (7, "probe confinement done\n")
    assert seen["unix"] == os.strerror(97)  # EAFNOSUPPORT: the seccomp filter's answer
    assert seen["tcp"] == os.strerror(101)  # ENETUNREACH: a network of its own, nothing up
    assert seen["tty"] == os.strerror(6)  # ENXIO: no controlling terminal
    assert seen["session_leader"] is True
    assert (seen["no_new_privs"], seen["seccomp"]) == ("1", "2")
    if os.getuid() == 0:
        # Root keeps capabilities in its own namespace (bubblewrap needs them there) but
        # none over the host: another user's file is out of reach.
        assert seen["foreign"] == os.strerror(13)  # EACCES
    else:
        assert int(seen["cap_eff"], 16) == 0
    # Its own user namespace maps it to itself: what it writes in its cwd is the caller's.
    assert seen["uid"] == os.getuid()
    assert seen["file_owner"] == os.getuid()
    assert (tmp_path / "probe-wrote-this").stat().st_uid == os.getuid()


def test_the_same_probe_unconfined_reaches_both_so_the_refusals_are_real(
    server: AgentForkServer, outside: dict[str, str], tmp_path: Path
) -> None:
    seen, _, code = _probe(server, tmp_path, outside, ProcessConfinement(mode="off"))
    assert code == 7
    assert (seen["unix"], seen["tcp"]) == ("ok", "ok")
    assert seen["foreign"] in ("ok", "")  # root's host powers, unconfined
    assert (seen["no_new_privs"], seen["seccomp"]) == ("0", "0")


def test_a_recording_child_keeps_the_network_but_no_unix_socket(
    server: AgentForkServer, outside: dict[str, str], tmp_path: Path
) -> None:
    seen, _, code = _probe(server, tmp_path, outside, ProcessConfinement(mode="strict"))
    assert code == 7
    assert seen["tcp"] == "ok"  # a live model client needs it
    assert seen["unix"] == os.strerror(97)
    assert seen["tty"] == os.strerror(6)


def test_a_server_store_child_keeps_unix_sockets(
    server: AgentForkServer, outside: dict[str, str], tmp_path: Path
) -> None:
    confinement = ProcessConfinement(unix_sockets=True, mode="strict")
    seen, _, code = _probe(server, tmp_path, outside, confinement)
    assert code == 7
    assert seen["unix"] == "ok"  # PostgreSQL's socket directory, say
    assert seen["seccomp"] == "2"  # still filtered (TIOCSTI)


def test_a_confinement_request_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="JSON object"):
        ProcessConfinement.from_json(["strict"])
    with pytest.raises(ValueError, match="strict, warn or off"):
        ProcessConfinement.from_json({"mode": "lax"})
    assert ProcessConfinement.from_json(ProcessConfinement(False, True, "off").to_json()) == (
        ProcessConfinement(False, True, "off")
    )


def _ns(pid: int, name: str) -> str:
    return os.readlink(f"/proc/{pid}/ns/{name}")


def test_the_real_agent_child_runs_confined(tmp_path: Path) -> None:
    env = agent_environment({"DSH_SESSIONS_ROOT": str(tmp_path / "sessions")})
    confinement = ProcessConfinement(network=False, mode="strict")
    with AgentForkServer() as server:
        agent = AgentProcess(env, tmp_path, fork_server=server, confinement=confinement)
        try:
            assert agent.initialize()["agentInfo"]["name"] == "dsh-acp-agent"
            agent.new_session(tmp_path)
            assert isinstance(agent.process, ForkedAgent)
            pid, parent = agent.process.pid, server.process.pid
            status = dict(
                line.split(":\t", 1)
                for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            )
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            for name in ("user", "net", "ipc", "mnt"):
                assert _ns(pid, name) != _ns(parent, name), name
            # Its file system: the host's read-only, its home hidden, its cwd writable.
            mounts: dict[str, tuple[list[str], str]] = {}
            for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
                fields, fstype = line.split(" - ")[0].split(), line.split(" - ")[1].split()[0]
                mounts[fields[4]] = (fields[5].split(","), fstype)
            assert "ro" in mounts["/"][0]
            assert "rw" in mounts[str(tmp_path.resolve())][0]
            home = os.path.realpath(os.path.expanduser("~"))
            covering = [m for m in mounts if m != "/" and (home + "/").startswith(m + "/")]
            assert any("ro" in mounts[m][0] and mounts[m][1] == "tmpfs" for m in covering)
            assert (status["NoNewPrivs"], status["Seccomp"]) == ("1", "2")
            assert os.getuid() == 0 or int(status["CapEff"], 16) == 0
            assert int(stat[3]) == pid  # session id: its own session...
            assert int(stat[4]) == 0  # ...and no controlling terminal (tty_nr)
            assert agent.finish() == 0  # and it still serves and writes its store
        finally:
            agent.kill()
    assert len(list((tmp_path / "sessions").iterdir())) == 1

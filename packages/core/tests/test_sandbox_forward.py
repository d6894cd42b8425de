"""The one loopback port a foreign agent's sandbox reaches (``LoopbackForward``) is relayed by
the gate: what an agent can make the gate hold through it is bounded (red team 4 F8)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core import SandboxSettings, ToolSandbox
from dsh_core._sandbox_net import MAX_CONNECTIONS

pytestmark = pytest.mark.usefixtures("needs_sandbox")

_OPENED = MAX_CONNECTIONS + 4
_AGENT = f"""
import socket, sys
port = int(sys.argv[1])
conns = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range({_OPENED})]
for conn in conns:
    conn.sendall(b"x")
# The first ones relayed answer while all are open; then they end, and the rest follow.
for conn in conns[:{MAX_CONNECTIONS}]:
    assert conn.recv(1) == b"x"
    conn.close()
for conn in conns[{MAX_CONNECTIONS}:]:
    assert conn.recv(1) == b"x"
    conn.close()
print("all answered")
"""


class _EchoService:
    """A host service answering each byte, counting connections open at once."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.open = 0
        self.peak = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.open += 1
                self.peak = max(self.peak, self.open)
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)
        with self._lock:
            self.open -= 1


@pytest.fixture
def service() -> Iterator[_EchoService]:
    started = _EchoService()
    yield started
    started.listener.close()


def test_an_agent_gets_at_most_a_few_relayed_connections_at_once(
    service: _EchoService, tmp_path: Path
) -> None:
    sandbox = ToolSandbox(SandboxSettings(sandbox="strict", sandbox_network="deny"))
    argv = [sys.executable, "-I", "-S", "-c", _AGENT, str(service.port)]
    confined = sandbox.confine(argv, str(tmp_path), forward_port=service.port)
    try:
        done = subprocess.run(
            confined.argv,
            env=confined.env,
            cwd=tmp_path,
            pass_fds=confined.pass_fds,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        confined.close()
    # Every connection was answered (the ones past the cap waited their turn), but the gate
    # never relayed more than the cap at once.
    assert done.stdout == "all answered\n", done.stderr
    assert service.peak == MAX_CONNECTIONS

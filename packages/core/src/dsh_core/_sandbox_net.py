"""One loopback service reachable from a sandbox that has no network: the host's relay.

A foreign agent must reach its ``dsh-llm-proxy`` and nothing else. Its sandbox gets a network
namespace of its own (no route anywhere, its own loopback, no abstract Unix sockets of the
host); :mod:`dsh_core._sandbox_listen` listens on ``127.0.0.1:PORT`` inside it and hands the
listening socket out, and :class:`LoopbackForward` (a thread of the gate) accepts each
connection on it and relays the bytes to ``127.0.0.1:PORT`` of the host — the proxy, chosen by
the gate. The agent can reach no other address, port or socket, and its base URL stays the
proxy's own (``http://127.0.0.1:PORT/v1``).

The relay runs in the gate, so what an agent can make it hold is bounded (red team 4 F8): at
most :data:`MAX_CONNECTIONS` connections are relayed at once (two threads each); past that
the relay accepts nothing more until one ends, and further connections wait in the listening
socket's backlog inside the sandbox (:data:`BACKLOG`, the kernel's to bound), never in the gate.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import sys
import threading
from pathlib import Path

__all__ = ["BACKLOG", "MAX_CONNECTIONS", "LoopbackForward"]

_LISTEN = Path(__file__).with_name("_sandbox_listen.py")
_CHUNK = 65_536
MAX_CONNECTIONS = 8
"""Connections relayed at once per sandbox (an agent's HTTP client keeps a few)."""
BACKLOG = 8
"""Connections the sandbox's listening socket queues while the relay is full."""


class LoopbackForward:
    """Relay ``127.0.0.1:port`` inside one sandbox to ``127.0.0.1:port`` of the host.

    Args:
        port: the host service's port (the same number inside).

    Attributes:
        child_fd: the descriptor the sandboxed helper inherits (pass it, then :meth:`started`).
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self._ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.child_fd = theirs.detach()
        self._stop_read, self._stop_write = os.pipe()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._relaying = 0  # connections with a pump still running
        self.peak = 0
        """The most connections relayed at once so far."""
        self._freed_read, self._freed_write = os.pipe()  # a connection ended: accept again
        os.set_blocking(self._freed_write, False)  # a full pipe already says so
        self._server = threading.Thread(target=self._serve, name="dsh-loopback", daemon=True)
        self._server.start()

    def prefix(self) -> list[str]:
        """The helper's command line, to put before the command inside the sandbox."""
        return [sys.executable, "-I", "-S", str(_LISTEN), str(self.child_fd), str(self.port), "--"]

    @staticmethod
    def helper_dir() -> str:
        """The folder the helper script lives in (it must be readable inside)."""
        return str(_LISTEN.parent)

    def started(self) -> None:
        """The sandbox has started (or failed to): close the parent's copy of ``child_fd``."""
        if self.child_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.child_fd)
            self.child_fd = -1

    def close(self) -> None:
        """Stop relaying and close every connection (idempotent)."""
        self.started()
        with contextlib.suppress(OSError):
            os.write(self._stop_write, b"x")
        self._server.join()
        with self._lock:
            for conn in self._open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            threads = list(self._threads)
        for thread in threads:
            thread.join()
        for fd in (self._stop_read, self._stop_write, self._freed_read, self._freed_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._ours.close()

    def _stopped(self, sock: socket.socket) -> bool:
        """Wait until ``sock`` is readable; ``True`` when asked to stop first."""
        ready, _, _ = select.select([sock, self._stop_read], [], [])
        return self._stop_read in ready

    def _full(self) -> bool:
        """While :data:`MAX_CONNECTIONS` are relayed, wait for one to end; ``True`` when
        asked to stop first."""
        while True:
            with self._lock:
                if self._relaying < MAX_CONNECTIONS:
                    return False
            ready, _, _ = select.select([self._freed_read, self._stop_read], [], [])
            if self._stop_read in ready:
                return True
            os.read(self._freed_read, 4096)

    def _serve(self) -> None:
        if self._stopped(self._ours):
            return
        try:
            _, fds, _, _ = socket.recv_fds(self._ours, 64, 1)
        except OSError:
            return
        if not fds:
            return  # the helper failed before listening: the agent cannot start either
        with socket.socket(fileno=fds[0]) as listener:
            while not self._full() and not self._stopped(listener):
                try:
                    inside, _ = listener.accept()
                except OSError:
                    return
                try:
                    host = socket.create_connection(("127.0.0.1", self.port), timeout=30)
                except OSError:
                    inside.close()
                    continue
                host.settimeout(None)
                for source, sink in ((inside, host), (host, inside)):
                    self._start(source, sink)

    def _start(self, source: socket.socket, sink: socket.socket) -> None:
        thread = threading.Thread(target=self._pump, args=(source, sink), daemon=True)
        with self._lock:
            if source not in self._open and sink not in self._open:  # a new connection
                self._relaying += 1
                self.peak = max(self.peak, self._relaying)
            self._open |= {source, sink}
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(_CHUNK):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            # Half-close: the other direction may still be answering.
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
            with self._lock:
                self._open.discard(source)
                ended = sink not in self._open
                if ended:
                    source.close()
                    sink.close()
                    self._relaying -= 1
            if ended:
                with contextlib.suppress(OSError):
                    os.write(self._freed_write, b"x")

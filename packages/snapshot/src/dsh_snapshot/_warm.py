"""Warm agents for a batch of runs: one fork server, one lane of it per worker, on first use.

A cold run starts a fresh interpreter that imports the whole agent; a warm run forks a fresh
process from a server that has imported it once (:class:`dsh_acp_agent.AgentForkServer`).
Either way every scenario runs in its own process with its own pipes, cwd, environment and
temporary home. ``--cold`` (or ``DSH_SNAPSHOT_COLD=1``) keeps the fresh-interpreter path.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Generator, Sequence

from dsh_acp_agent import AgentForkServer, ForkServerError

__all__ = ["COLD_ENV", "WarmAgents", "cold_by_default"]

COLD_ENV = "DSH_SNAPSHOT_COLD"
"""Set to ``1``/``true`` to make the fresh-interpreter path the default of every batch."""


def cold_by_default() -> bool:
    """Whether ``DSH_SNAPSHOT_COLD`` asks for the fresh-interpreter path."""
    return os.environ.get(COLD_ENV, "").strip().lower() in ("1", "true", "yes")


class WarmAgents:
    """Up to ``size`` lanes of one fork server, each lent to one run at a time.

    One interpreter imports the agent whatever ``size`` is (a server per worker cost a few
    hundred ms of CPU each); each lane runs one child at a time, the lanes run theirs at once
    (:meth:`dsh_acp_agent.AgentForkServer.lane`). A server found dead is replaced by a new
    one on the next lease.

    Args:
        size: how many runs may hold a lane at once (the number of worker threads).
        start_timeout: seconds the server may take to import the agent (and to open a lane).
        stores: the store backends the runs open, imported once by the server (default:
            every installed one).
    """

    def __init__(
        self, size: int, start_timeout: float = 120.0, *, stores: Sequence[str] | None = None
    ) -> None:
        self._size = max(size, 1)
        self._start_timeout = start_timeout
        self._stores = None if stores is None else tuple(stores)
        self._idle: queue.SimpleQueue[AgentForkServer] = queue.SimpleQueue()
        self._all: list[AgentForkServer] = []  # the lanes lent or idle
        self._servers: list[AgentForkServer] = []  # every server started; the last one serves
        self._count = 0  # lanes open or opening
        self._lock = threading.Lock()
        self._starting = threading.Lock()  # one server start at a time; lanes wait for it
        self._closed = False

    @contextlib.contextmanager
    def lease(self) -> Generator[AgentForkServer, None, None]:
        """A lane for one run; it goes back to the pool afterwards unless it broke.

        Raises:
            ForkServerError: the server could not be started or open a lane.
        """
        server = self._take()
        broken = False
        try:
            yield server
        except ForkServerError:
            broken = True
            raise
        finally:
            if broken or server.process.poll() is not None:
                self._discard(server)
            else:
                self._idle.put(server)

    def _take(self) -> AgentForkServer:
        if self._closed:
            raise ForkServerError("the warm agents are closed")
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._closed:
                raise ForkServerError("the warm agents are closed")
            start = self._count < self._size
            self._count += start
        if not start:
            return self._idle.get()  # every lane exists: wait for one to come back
        try:
            server = self._open_lane()
        except BaseException:
            with self._lock:
                self._count -= 1
            raise
        with self._lock:
            self._all.append(server)
        return server

    def _open_lane(self) -> AgentForkServer:
        with self._starting:
            server = self._servers[-1] if self._servers else None
            if server is None or server.process.poll() is not None:
                server = AgentForkServer(self._start_timeout, stores=self._stores)
                with self._lock:
                    closed = self._closed
                    if not closed:
                        self._servers.append(server)
                if closed:  # closed while this server started: nobody would stop it
                    server.close()
                    raise ForkServerError("the warm agents are closed")
            return server.lane(self._start_timeout)

    def _discard(self, server: AgentForkServer) -> None:
        with self._lock:
            if server in self._all:
                self._all.remove(server)
                self._count -= 1
        server.close()

    def close(self) -> None:
        """Close every lane and stop every server (idempotent)."""
        with self._lock:
            self._closed = True
            lanes, self._all = self._all, []
            servers, self._servers = self._servers, []
        for server in [*lanes, *servers]:
            server.close()

    def __enter__(self) -> WarmAgents:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

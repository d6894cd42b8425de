"""An in-memory ``SessionStore``: a public test double, like httpx's ``MockTransport``."""

from __future__ import annotations

from collections.abc import Sequence

from dsh_core._errors import SessionBusyError, SessionExistsError, SessionNotFoundError
from dsh_core._events import Event, SessionHeader
from dsh_core._logformat import SessionLog
from dsh_core._session import (
    CreateOptions,
    Session,
    check_batch,
    close_open_turn,
    prepare_header,
)

__all__ = ["InMemorySessionStore"]


class _MemoryWriter:
    def __init__(self, store: InMemorySessionStore, session_id: str) -> None:
        self._store = store
        self._id = session_id
        self._open = True

    def append(self, events: Sequence[Event]) -> None:
        stored = self._store._logs[self._id]
        check_batch(f"session {self._id}", events, len(stored.events))
        stored.events.extend(events)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._store._writers.discard(self._id)


class InMemorySessionStore:
    """Keeps logs in a dict. Same contract as the real stores, no durability."""

    def __init__(self) -> None:
        self._logs: dict[str, SessionLog] = {}
        self._writers: set[str] = set()

    def _open_writer(self, session_id: str) -> _MemoryWriter:
        if session_id in self._writers:
            raise SessionBusyError(f"session {session_id} is already open for writing")
        self._writers.add(session_id)
        return _MemoryWriter(self, session_id)

    def create(self, options: CreateOptions) -> Session:
        header = prepare_header(options)
        if header.id in self._logs:
            raise SessionExistsError(f"session {header.id} already exists in memory")
        seed = [event.with_seq(index) for index, event in enumerate(options.seed)]
        self._logs[header.id] = SessionLog(header, list(seed))
        return Session(header, seed, self._open_writer(header.id))

    def resume(self, session_id: str) -> Session:
        log = self._get(session_id)
        writer = self._open_writer(session_id)
        closers = close_open_turn(log.events)
        if closers:
            writer.append(closers)
        return Session(log.header, list(log.events), writer)

    def load(self, session_id: str) -> SessionLog:
        log = self._get(session_id)
        events = list(log.events)
        events.extend(close_open_turn(events))
        return SessionLog(log.header, events)

    def list_sessions(self) -> list[SessionHeader]:
        return sorted(
            (log.header for log in self._logs.values()), key=lambda h: (h.created_at, h.id)
        )

    def close(self) -> None:
        pass

    def _get(self, session_id: str) -> SessionLog:
        try:
            return self._logs[session_id]
        except KeyError:
            raise SessionNotFoundError(f"no session {session_id} in memory") from None

"""The live session, the store contract every backend implements, and log-shape helpers."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from dsh_core._errors import SeqError
from dsh_core._events import Event, SessionHeader, step_end, tool_result, turn_end
from dsh_core._logformat import SessionLog, _is_int

__all__ = [
    "CreateOptions",
    "Session",
    "SessionMeta",
    "SessionStore",
    "SessionWriter",
    "check_batch",
    "close_open_turn",
    "completed_turn_prefix",
    "new_created_at",
    "now_ms",
    "prepare_header",
]


def now_ms() -> int:
    """Wall-clock epoch milliseconds (event ``time``)."""
    return time.time_ns() // 1_000_000


_created_lock = threading.Lock()
_last_created = 0


def new_created_at() -> int:
    """Epoch ms for a new header, strictly increasing within this process.

    Replay orders children by ``(createdAt, id)``; two children created in one millisecond
    would otherwise be ordered by their random ids rather than by creation.
    """
    global _last_created  # noqa: PLW0603  (one clock per process, on purpose)
    with _created_lock:
        _last_created = max(now_ms(), _last_created + 1)
        return _last_created


@dataclass(slots=True)
class SessionMeta:
    """Header fields a creator chooses. ``None`` means absent (or, for createdAt, now)."""

    created_at: int | None = None
    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int | None = None
    origin: str | None = None
    delegation_depth: int | None = None


@dataclass(slots=True)
class CreateOptions:
    """What ``SessionStore.create`` needs: an id (default: a new UUID), a seed, the meta.

    The seed is copied into the new log, renumbered from 0. ``seedLength`` is never inferred
    from it: a fork sets ``meta.seed_length`` explicitly.
    """

    session_id: str | None = None
    seed: Sequence[Event] = ()
    meta: SessionMeta = field(default_factory=SessionMeta)


def prepare_header(options: CreateOptions) -> SessionHeader:
    """The header a store writes for ``options``."""
    meta = options.meta
    # refuse here what the reader would refuse later: a store must never write a header it
    # cannot read back
    for name, value in (
        ("createdAt", meta.created_at),
        ("seedLength", meta.seed_length),
        ("delegationDepth", meta.delegation_depth),
    ):
        if value is not None and (not _is_int(value) or value < 0):
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    for name, text in (
        ("session id", options.session_id),
        ("cwd", meta.cwd),
        ("parentSession", meta.parent_session),
        ("origin", meta.origin),
    ):
        if text is not None and not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"{name} must be a string, got {text!r}")
    return SessionHeader(
        id=options.session_id or str(uuid.uuid4()),
        created_at=meta.created_at if meta.created_at is not None else new_created_at(),
        cwd=meta.cwd,
        parent_session=meta.parent_session,
        seed_length=meta.seed_length,
        origin=meta.origin,
        delegation_depth=meta.delegation_depth,
    )


class SessionWriter(Protocol):
    """A store's write handle on one session; holding it excludes every other writer."""

    def append(self, events: Sequence[Event]) -> None:
        """Durably append one batch (one transaction / one fsync).

        Raises:
            SeqError: the batch's first ``seq`` does not continue the stored log, or the
                batch itself is not contiguous. Nothing is written.
        """
        ...

    def close(self) -> None:
        """Release the writer lock. Idempotent."""
        ...


def check_batch(where: str, events: Sequence[Event], next_seq: int) -> None:
    """Refuse a batch a store must not append, as :meth:`SessionWriter.append` promises.

    Args:
        where: how the error names the log, e.g. ``"session s1 (/path/s1.jsonl)"``.
        events: the batch, in order.
        next_seq: the ``seq`` the stored log continues at.

    Raises:
        SeqError: the batch is not contiguous, or its first ``seq`` is not ``next_seq``.
    """
    if not events:
        return
    first = events[0].seq
    for offset, event in enumerate(events):
        if event.seq != first + offset:
            raise SeqError(
                f"{where}: the batch is not contiguous: event {offset} has seq {event.seq}, "
                f"expected {first + offset}"
            )
    if first != next_seq:
        raise SeqError(
            f"{where}: the batch starts at seq {first} but the log continues at seq {next_seq}"
        )


@runtime_checkable
class SessionStore(Protocol):
    """Persistence of session logs. Every backend passes ``dsh_core.testing``'s suite."""

    def create(self, options: CreateOptions) -> Session:
        """Write the header (from :func:`prepare_header`) and the seed atomically.

        Raises:
            SessionExistsError: the id is taken.
        """
        ...

    def resume(self, session_id: str) -> Session:
        """Open a stored session for writing; the header is kept exactly as stored.

        An open turn left by a crash is closed durably first (see :func:`close_open_turn`).

        Raises:
            SessionNotFoundError, SessionBusyError, LogFormatError, StoreCorruptError.
        """
        ...

    def load(self, session_id: str) -> SessionLog:
        """Read a session without writing anything; an open turn is closed in the view only."""
        ...

    def list_sessions(self) -> list[SessionHeader]:
        """Headers of every stored session, ordered by ``(createdAt, id)``."""
        ...

    def close(self) -> None:
        """Release resources. Sessions opened from this store must be closed first."""
        ...


class Session:
    """A session open for writing: the header, the whole log in memory, and pending events.

    Events are numbered here (``seq`` = index); :meth:`flush` hands the pending ones to the
    store as one batch.
    """

    def __init__(
        self, header: SessionHeader, events: Sequence[Event], writer: SessionWriter
    ) -> None:
        for index, event in enumerate(events):
            if event.seq != index:
                raise SeqError(f"session {header.id}: event {index} has seq {event.seq}")
        self.header = header
        self._events: list[Event] = list(events)
        self._pending: list[Event] = []
        self._writer = writer
        self._closed = False

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def events(self) -> Sequence[Event]:
        """Every event, stored and pending."""
        return self._events

    @property
    def next_seq(self) -> int:
        return len(self._events)

    def record(self, type: str, data: dict[str, Any], *, time: int | None = None) -> Event:
        """Append a new event with the next ``seq`` (pending until :meth:`flush`)."""
        event = Event(type, len(self._events), now_ms() if time is None else time, data)
        self._events.append(event)
        self._pending.append(event)
        return event

    def add(self, event: Event) -> Event:
        """Append a prebuilt event; its ``seq`` must be the next one."""
        if event.seq != len(self._events):
            raise SeqError(f"session {self.id}: expected seq {len(self._events)}, got {event.seq}")
        self._events.append(event)
        self._pending.append(event)
        return event

    def flush(self) -> None:
        """Write pending events as one durable batch."""
        if self._pending:
            # pending only once stored: a refused batch stays pending, not silently dropped
            # while later events are numbered after it
            self._writer.append(list(self._pending))
            self._pending = []

    def close(self) -> None:
        """Flush and release the writer. Idempotent."""
        if not self._closed:
            try:
                self.flush()
            finally:
                self._closed = True
                self._writer.close()


def completed_turn_prefix(events: Sequence[Event]) -> list[Event]:
    """Events up to and including the last ``turn/end`` (empty when no turn completed)."""
    for index in range(len(events) - 1, -1, -1):
        if events[index].type == "turn/end":
            return list(events[: index + 1])
    return []


INTERRUPTED_RESULT_TEXT = "Tool call interrupted by a crash; no result was recorded."


def close_open_turn(events: Sequence[Event], time: int | None = None) -> list[Event]:
    """Synthetic closers for a turn left open by a crash (empty when nothing is open).

    Upstream's ``interruptedTurnClosers``: an error ``tool/result`` (``error.code``
    ``interrupted``) for each call of the open step that has no result — the calls are the
    tool-call blocks of its ``assistant/message`` (and any ``tool/call``), since a crash can
    come before a call was dispatched — then ``step/end`` for an open step, then ``turn/end
    {kind:"interrupted"}``; numbered after the last event and stamped with its time (or
    ``time``), so a repair is deterministic.
    """
    # Logs from other writers are read as found: a missing or non-integer turn/step number
    # must not hide an open turn or crash the repair.
    # Only the events after the last turn/end can be open; before it, only the turn number
    # carries over (:func:`_turn_before`). Loaded events decode their data on first use, so
    # a long log is never decoded whole just to look at its tail.
    start = len(events)
    while start and events[start - 1].type != "turn/end":
        start -= 1
    in_turn = False
    open_turn: int | None = None  # looked up before ``start`` only when needed
    open_step: int | None = None
    pending_calls: dict[str, int] = {}
    for index in range(start, len(events)):
        event = events[index]
        kind = event.type
        if kind == "turn/start":
            in_turn, open_step, pending_calls = True, None, {}
            turn = event.data.get("turn")
            if not _is_int(turn):
                turn = (_turn_before(events, start) if open_turn is None else open_turn) + 1
            open_turn = turn
        elif kind == "turn/end":
            in_turn, open_step, pending_calls = False, None, {}
        elif not in_turn:
            continue
        elif kind == "step/start":
            step = event.data.get("step")
            open_step = step if _is_int(step) else (open_step or 0) + 1
        elif kind == "step/end":
            # A closed step's unanswered calls stay unanswered: upstream repairs only the
            # step the crash interrupted.
            open_step, pending_calls = None, {}
        elif kind == "assistant/message":
            data = event.data
            step = data.get("step")
            for call_id in _tool_call_ids(data.get("content")):
                pending_calls.setdefault(call_id, step if _is_int(step) else (open_step or 0))
        elif kind == "tool/call":
            data = event.data
            step = data.get("step")
            call_id = str(data.get("callId"))
            pending_calls.setdefault(call_id, step if _is_int(step) else (open_step or 0))
        elif kind == "tool/result":
            pending_calls.pop(str(event.data.get("callId")), None)
    if not in_turn:
        return []
    assert open_turn is not None  # in_turn is set by a turn/start, which sets it too
    at = time if time is not None else (events[-1].time if events else now_ms())
    seq = len(events)
    closers: list[Event] = []
    for call_id, call_step in pending_calls.items():
        result = tool_result(seq, at, open_turn, call_step, call_id, INTERRUPTED_RESULT_TEXT, True)
        result.data["error"] = {"name": "InterruptedError", "code": "interrupted"}
        closers.append(result)
        seq += 1
    if open_step is not None:
        closers.append(step_end(seq, at, open_turn, open_step))
        seq += 1
    closers.append(turn_end(seq, at, open_turn, "interrupted"))
    return closers


def _turn_before(events: Sequence[Event], end: int) -> int:
    """The turn number a reader of ``events[:end]`` holds: that of the last ``turn/start``
    with an integer ``turn``, plus one for each later ``turn/start`` without one (0 when
    there is none)."""
    unnumbered = 0
    for index in range(end - 1, -1, -1):
        event = events[index]
        if event.type == "turn/start":
            turn = event.data.get("turn")
            if _is_int(turn):
                return turn + unnumbered
            unnumbered += 1
    return unnumbered


def _tool_call_ids(content: Any) -> list[str]:
    """The ids of the tool-call blocks in an ``assistant/message`` content list."""
    if not isinstance(content, list):
        return []
    ids: list[str] = []
    for block in cast(list[Any], content):
        if isinstance(block, dict):
            fields = cast(dict[str, Any], block)
            if fields.get("type") == "tool-call":
                ids.append(str(fields.get("id")))
    return ids

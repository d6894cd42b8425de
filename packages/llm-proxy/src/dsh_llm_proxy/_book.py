"""Session inference and log writing: which session a request belongs to, and its events.

The rules (the README states them for users):

1. ``X-DSH-Session-Id`` names the session outright.
2. A request whose messages extend a session's recorded conversation (every message so far,
   the proxy's own answers included, then something new) continues that session; the longest
   such conversation wins.
3. Otherwise, a request that starts with another session's completed turns (up to one of its
   ``turn/end`` events) and then diverges is a fork child of that session: it is seeded with
   those events, ``seedLength`` is their number, ``parentSession`` the parent's id.
4. Otherwise it is a new session; while another session waits on a tool call (its last answer
   asked for tools and no request has continued it yet), the new one is that session's child:
   of the waiting session whose pending tool-call arguments hold one of the new conversation's
   user messages (the delegation prompt), else of the one that most recently asked for tools.

A session with a call in flight takes no other request (there is no order to put two in).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from dsh_core import (
    Chunk,
    CreateOptions,
    DshError,
    Event,
    Session,
    SessionHeader,
    SessionMeta,
    SessionStore,
    new_created_at,
    now_ms,
    prepare_header,
)
from dsh_llm_proxy._wire import as_mapping, finish_kind, message_key, message_text, response_blocks
from dsh_llm_proxy._wire import response_key as _response_key

__all__ = ["Call", "SessionBook", "SessionConflictError", "call_inputs"]

_TURN_END_KINDS = {"stop": "completed", "max-tokens": "max-tokens"}
# A tool-call argument shorter than this ("Paris", "ls") says nothing about which session
# delegated a new conversation; a delegation prompt is longer.
_MIN_DELEGATION_TEXT = 12


class SessionConflictError(DshError):
    """An ``X-DSH-Session-Id`` request that does not continue that session's conversation."""


@dataclass(slots=True)
class _Boundary:
    keys: int  # conversation length after the turn ended
    events: int  # events up to and including its turn/end
    turn: int


class _MemoryWriter:
    """The writer of a session that is tracked but not stored (replay mode)."""

    def append(self, events: Sequence[Event]) -> None:
        del events

    def close(self) -> None:
        return None


@dataclass(slots=True)
class _Tracked:
    options: CreateOptions
    header: SessionHeader
    depth: int
    session: Session | None = None  # created in the store at its first finished call
    keys: list[str] = field(default_factory=list[str])
    boundaries: list[_Boundary] = field(default_factory=list[_Boundary])
    turn: int = 0
    step: int = 0
    turn_open: bool = False
    step_open: bool = False
    busy: bool = False
    waiting: int | None = None  # order stamp of its last tool-call answer, while unanswered
    delegations: tuple[str, ...] = ()  # string arguments of those pending tool calls
    request_header: str | None = None

    @property
    def id(self) -> str:
        return self.header.id


@dataclass(slots=True)
class Call:
    """One request assigned to a session, between :meth:`SessionBook.assign` and its end."""

    tracked: _Tracked
    messages: list[Mapping[str, Any]]
    keys: list[str]
    new_from: int
    received: int
    request_header: dict[str, Any]

    @property
    def session_id(self) -> str:
        """The id of the session the call belongs to."""
        return self.tracked.id

    def inputs(self) -> list[str]:
        """What this call adds to its session, as replay compares it (see :func:`call_inputs`)."""
        out: list[str] = []
        for message in self.messages[self.new_from :]:
            text = message_text(message.get("content"))
            if message.get("role") == "user":
                out.append(f"user: {text}")
            elif message.get("role") == "tool":
                out.append(f"tool {message.get('tool_call_id')}: {text}")
        return out


def call_inputs(events: Sequence[Event]) -> list[list[str]]:
    """For each recorded call (each step with chunks), the user messages and tool results
    logged since the previous call, in the form of :meth:`Call.inputs`."""
    out: list[list[str]] = []
    pending: list[str] = []
    current: tuple[Any, Any] | None = None
    for event in events:
        data = event.data
        if event.type == "user/message":
            pending.append("user: " + "".join(_texts(data.get("content"))))
        elif event.type == "tool/result":
            pending.append(f"tool {data.get('callId')}: " + "".join(_texts(data.get("content"))))
        elif event.type == "assistant/chunk":
            at = (data.get("turn"), data.get("step"))
            if at != current:
                current = at
                out.append(pending)
                pending = []
    return out


def _texts(content: Any) -> list[str]:
    blocks = cast(list[Any], content) if isinstance(content, list) else []
    return [
        str(as_mapping(b).get("text", "")) for b in blocks if as_mapping(b).get("type") == "text"
    ]


class SessionBook:
    """Every session this proxy run has seen, and the inference that assigns requests to them.

    Args:
        store: where logs go; ``None`` keeps them in memory only (replay needs the inference,
            not the logs).
        scrub: applied to each event's data before it is logged (placeholders for paths and
            user scrubbers, see :mod:`dsh_llm_proxy._scrub`).
    """

    def __init__(
        self, store: SessionStore | None, scrub: Callable[[Any], Any] | None = None
    ) -> None:
        self._store = store
        self._scrub = scrub
        self._sessions: list[_Tracked] = []
        self._stamp = itertools.count(1)
        # New sessions whose first call failed, by that call's conversation: the client's retry
        # gets the same session (and id) back rather than a fresh one.
        self._abandoned: dict[tuple[str, ...], tuple[_Tracked, int]] = {}

    @property
    def session_ids(self) -> list[str]:
        """Ids of the sessions tracked so far, in creation order."""
        return [t.id for t in self._sessions]

    @property
    def headers(self) -> list[SessionHeader]:
        """Headers of the sessions tracked so far (parent, seedLength…), in creation order."""
        return [t.header for t in self._sessions]

    def assign(
        self,
        body: Mapping[str, Any],
        explicit_id: str | None = None,
    ) -> Call:
        """Find (or create) the session of one chat-completions request and mark it busy.

        Raises:
            SessionConflictError: ``explicit_id`` names a session whose conversation the
                request does not continue, or one with a call in flight.
        """
        raw = body.get("messages")
        messages = [
            cast(Mapping[str, Any], m)
            for m in (cast(list[Any], raw) if isinstance(raw, list) else [])
            if isinstance(m, Mapping)
        ]
        keys = [message_key(m) for m in messages]
        opening = [message_text(m.get("content")) for m in messages if m.get("role") == "user"]
        tracked, new_from = self._infer(keys, explicit_id, opening)
        tracked.busy = True
        header = {
            "config": {"provider": "openai-compatible", "model": body.get("model")},
            "system": "\n\n".join(
                message_text(m.get("content"))
                for m in messages
                if m.get("role") in ("system", "developer")
            ),
            "tools": body.get("tools", []),
        }
        return Call(tracked, messages, keys, new_from, now_ms(), header)

    def _infer(
        self, keys: list[str], explicit_id: str | None, opening: Sequence[str] = ()
    ) -> tuple[_Tracked, int]:
        if explicit_id is not None:
            found = next((t for t in self._sessions if t.id == explicit_id), None)
            if found is not None:
                if found.busy or keys[: len(found.keys)] != found.keys:
                    raise SessionConflictError(
                        f"session {explicit_id!r} (X-DSH-Session-Id) has a call in flight or "
                        "the request does not continue its recorded conversation"
                    )
                return found, len(found.keys)
        retried = self._abandoned.pop(tuple(keys), None)
        if retried is not None and explicit_id in (None, retried[0].id):
            self._sessions.append(retried[0])
            return retried
        extended = [
            t
            for t in self._sessions
            if not t.busy and t.keys and len(t.keys) < len(keys) and keys[: len(t.keys)] == t.keys
        ]
        if extended and explicit_id is None:
            best = max(extended, key=lambda t: len(t.keys))
            return best, len(best.keys)
        fork: tuple[_Tracked, _Boundary] | None = None
        for t in self._sessions:
            for boundary in reversed(t.boundaries):
                if boundary.keys <= len(keys) and keys[: boundary.keys] == t.keys[: boundary.keys]:
                    # The longest shared prefix wins; on a tie the oldest session, whose
                    # events those are (a fork child holds them only as its seed).
                    if fork is None or boundary.keys > fork[1].keys:
                        fork = (t, boundary)
                    break
        if fork is not None:
            parent, boundary = fork
            return self._fork(parent, boundary, explicit_id), boundary.keys
        waiting = [t for t in self._sessions if t.waiting is not None]
        # Several may wait at once (parallel sub-agents, one of them running a tool): the one
        # whose tool call carried this conversation's prompt delegated it.
        named = [t for t in waiting if any(d in u for d in t.delegations for u in opening)]
        candidates = named or waiting
        parent = max(candidates, key=lambda t: t.waiting or 0) if candidates else None
        meta = SessionMeta(created_at=new_created_at())
        if parent is not None:
            meta.parent_session = parent.id
            meta.origin = "subagent"
            meta.delegation_depth = parent.depth + 1
        return self._new(CreateOptions(session_id=explicit_id, meta=meta)), 0

    def _new(self, options: CreateOptions) -> _Tracked:
        if options.session_id is None and self._store is not None:
            # A recorded session is named by its place in the recording (s0000, s0001, …), not
            # by a fresh UUID: recording again gives the same file names, so a re-record's
            # diff shows what changed inside the files, not every file renamed.
            options.session_id = self._stable_id()
        depth = options.meta.delegation_depth or 0
        tracked = _Tracked(options, prepare_header(options), depth)
        options.session_id = tracked.header.id
        options.meta.created_at = tracked.header.created_at
        self._sessions.append(tracked)
        return tracked

    def _fork(self, parent: _Tracked, boundary: _Boundary, explicit_id: str | None) -> _Tracked:
        assert parent.session is not None  # a boundary exists only after a stored call
        seed = list(parent.session.events[: boundary.events])
        meta = SessionMeta(
            created_at=new_created_at(),
            parent_session=parent.id,
            seed_length=boundary.events,
            origin="subagent",
            delegation_depth=parent.depth + 1,
        )
        child = self._new(CreateOptions(session_id=explicit_id, seed=seed, meta=meta))
        child.keys = list(parent.keys[: boundary.keys])
        child.boundaries = [b for b in parent.boundaries if b.keys <= boundary.keys]
        child.turn = boundary.turn
        child.request_header = parent.request_header
        return child

    def _stable_id(self) -> str:
        taken = {t.header.id for t in self._sessions}
        number = len(self._sessions)
        while f"s{number:04d}" in taken:  # an X-DSH-Session-Id may have named one so
            number += 1
        return f"s{number:04d}"

    def close(self) -> None:
        """Flush and release every session's writer (a turn waiting on tools stays open)."""
        for tracked in self._sessions:
            if tracked.session is not None:
                tracked.session.close()

    # --- the end of a call ----------------------------------------------------------------------

    def abandon(self, call: Call) -> None:
        """The call failed: nothing is logged, and a session it would have created is dropped."""
        tracked = call.tracked
        tracked.busy = False
        if tracked.session is None:
            self._sessions.remove(tracked)
            self._abandoned[tuple(call.keys)] = (tracked, call.new_from)

    def finish(self, call: Call, chunks: Sequence[tuple[int, Chunk]]) -> None:
        """Log the call: its new request messages, then the answer's chunks as they arrived.

        Args:
            call: from :meth:`assign`.
            chunks: ``(epoch ms, chunk)`` pairs of the answer, ending with ``finish``.
        """
        tracked = call.tracked
        try:
            if tracked.session is None:
                tracked.session = self._create(tracked.options)
            self._log(tracked, tracked.session, call, chunks)
            tracked.session.flush()
        finally:
            tracked.busy = False

    def _create(self, options: CreateOptions) -> Session:
        if self._store is None:
            return Session(prepare_header(options), _renumber(options.seed), _MemoryWriter())
        return self._store.create(options)

    def _log(
        self, t: _Tracked, s: Session, call: Call, chunks: Sequence[tuple[int, Chunk]]
    ) -> None:
        at = call.received

        def add(kind: str, data: dict[str, Any], time: int = at) -> None:
            s.record(kind, self._scrub(data) if self._scrub else data, time=time)

        def open_turn() -> None:
            if not t.turn_open:
                t.turn, t.step, t.turn_open = t.turn + 1, 0, True
                add(
                    "turn/start",
                    {"turn": t.turn, "trigger": {"kind": "message", "source": {"kind": "user"}}},
                )

        def close_step(time: int = at) -> None:
            if t.step_open:
                add("step/end", {"turn": t.turn, "step": t.step}, time)
                t.step_open = False

        for message in call.messages[call.new_from :]:
            role = message.get("role")
            if role in ("system", "developer"):
                continue  # carried by request/header
            open_turn()
            text = message_text(message.get("content"))
            if role == "tool":
                add(
                    "tool/result",
                    {
                        "turn": t.turn,
                        "step": t.step,
                        "callId": str(message.get("tool_call_id")),
                        "content": [{"type": "text", "text": text}],
                        "isError": False,
                    },
                )
            elif role == "assistant":  # history the client wrote itself: no chunks
                close_step()
                t.step += 1
                add("step/start", {"turn": t.turn, "step": t.step})
                blocks = _client_blocks(message, text)
                add("assistant/message", {"turn": t.turn, "step": t.step, "content": blocks})
                _log_calls(add, t, blocks, at)
                t.step_open = True
            else:
                add(
                    "user/message",
                    {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}},
                )
        open_turn()
        close_step()
        header_text = repr(sorted(call.request_header.items()))
        if header_text != t.request_header:
            reason = "initial" if t.request_header is None else "changed"
            add("request/header", {"header": call.request_header, "reason": reason})
            t.request_header = header_text
        t.step += 1
        add("step/start", {"turn": t.turn, "step": t.step})
        only_chunks = [c for _, c in chunks]
        for time, chunk in chunks:
            add("assistant/chunk", {"turn": t.turn, "step": t.step, "chunk": chunk}, time)
        end = chunks[-1][0] if chunks else at
        blocks = response_blocks(only_chunks)
        message_data: dict[str, Any] = {"turn": t.turn, "step": t.step, "content": blocks}
        usage = next((c["usage"] for c in only_chunks if c["type"] == "usage"), None)
        if usage is not None:
            message_data["usage"] = usage
        add("assistant/message", message_data, end)
        _log_calls(add, t, blocks, end)
        t.step_open = True
        t.keys = [*call.keys, _response_key(only_chunks)]
        kind = finish_kind(only_chunks)
        if kind == "tool-calls":
            t.waiting = next(self._stamp)
            t.delegations = _argument_texts(blocks)
            return
        t.waiting, t.delegations = None, ()
        close_step(end)
        reason = {"kind": _TURN_END_KINDS.get(kind, "error")}
        add("turn/end", {"turn": t.turn, "reason": reason}, end)
        t.turn_open = False
        t.boundaries.append(_Boundary(len(t.keys), len(s.events), t.turn))


def _argument_texts(blocks: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Every string of at least ``_MIN_DELEGATION_TEXT`` characters in the tool calls'
    arguments (parsed as JSON; an unparsable argument string counts whole)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if len(value.strip()) >= _MIN_DELEGATION_TEXT:
                found.append(value.strip())
        elif isinstance(value, Mapping):
            for item in cast(Mapping[str, Any], value).values():
                walk(item)
        elif isinstance(value, list):
            for item in cast(list[Any], value):
                walk(item)

    for block in blocks:
        if block["type"] == "tool-call":
            raw = str(block.get("arguments") or "")
            try:
                walk(json.loads(raw))
            except ValueError:
                walk(raw)
    return tuple(found)


def _renumber(events: Sequence[Event]) -> list[Event]:
    return [event.with_seq(index) for index, event in enumerate(events)]


def _client_blocks(message: Mapping[str, Any], text: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text})
    raw_calls = message.get("tool_calls")
    for raw in cast(list[Any], raw_calls) if isinstance(raw_calls, list) else []:
        call = as_mapping(raw)
        fn = as_mapping(call.get("function"))
        arguments = fn.get("arguments")
        blocks.append(
            {
                "type": "tool-call",
                "id": str(call.get("id")),
                "name": str(fn.get("name")),
                "arguments": arguments if isinstance(arguments, str) else "",
            }
        )
    return blocks


def _log_calls(add: Any, t: _Tracked, blocks: Sequence[Mapping[str, Any]], time: int) -> None:
    for block in blocks:
        if block["type"] == "tool-call":
            add(
                "tool/call",
                {
                    "turn": t.turn,
                    "step": t.step,
                    "callId": block["id"],
                    "name": block["name"],
                    "arguments": block["arguments"],
                },
                time,
            )

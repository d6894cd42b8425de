"""Typed session events and the session header (DSH session format, version 0).

Events keep their ``data`` as the JSON object it is on the wire, so event types and fields
from newer logs survive a read and a write unchanged; the June-era shapes this project writes
are described by the ``TypedDict``s below and built by the constructor functions.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "FORMAT_VERSION",
    "AssistantChunkData",
    "BlockEnd",
    "BlockStart",
    "Chunk",
    "ContentBlock",
    "Event",
    "Finish",
    "FinishKind",
    "ReasoningBlock",
    "ReasoningDelta",
    "SessionHeader",
    "TextBlock",
    "TextDelta",
    "ToolCallBlock",
    "ToolCallDelta",
    "TurnEndKind",
    "Usage",
    "UsageChunk",
    "assistant_chunk",
    "assistant_message",
    "event_from_raw",
    "step_end",
    "step_start",
    "tool_call",
    "tool_result",
    "turn_end",
    "turn_start",
    "user_message",
]

FORMAT_VERSION = 0

TurnEndKind = Literal["completed", "aborted", "error", "max-tokens", "interrupted"]
FinishKind = Literal["stop", "tool-calls", "max-tokens", "error", "aborted"]


# --- content blocks -------------------------------------------------------------------------


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ReasoningBlock(TypedDict):
    type: Literal["reasoning"]
    text: str


class ToolCallBlock(TypedDict):
    type: Literal["tool-call"]
    id: str
    name: str
    arguments: str


ContentBlock = TextBlock | ReasoningBlock | ToolCallBlock


# --- stream chunks (the model client's output, logged verbatim in assistant/chunk) ----------


class BlockStart(TypedDict):
    type: Literal["block-start"]
    index: int
    blockType: Literal["text", "reasoning", "tool-call"]


class TextDelta(TypedDict):
    type: Literal["text-delta"]
    index: int
    text: str


class ReasoningDelta(TypedDict):
    type: Literal["reasoning-delta"]
    index: int
    text: str


class ToolCallDelta(TypedDict):
    type: Literal["tool-call-delta"]
    index: int
    id: str
    name: NotRequired[str]
    argumentsDelta: str


class BlockEnd(TypedDict):
    type: Literal["block-end"]
    index: int
    block: ContentBlock


class Usage(TypedDict):
    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    reasoningTokens: int


class UsageChunk(TypedDict):
    type: Literal["usage"]
    usage: Usage


class FinishReason(TypedDict):
    kind: FinishKind


class Finish(TypedDict):
    type: Literal["finish"]
    reason: FinishReason


Chunk = BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | UsageChunk | Finish


class AssistantChunkData(TypedDict):
    turn: int
    step: int
    chunk: Chunk


# --- envelope and header --------------------------------------------------------------------


class Event:
    """One logical event: ``{"type","seq","time","data"}`` plus optional surface fields.

    ``extra`` holds envelope keys this version does not know, so they are written back as read.

    A store's loader may hand over ``data`` still as its JSON text (:func:`event_from_raw`,
    already validated); it is decoded on first access and kept, so a loaded log costs about
    its size on disk until its events are looked at (issue 24: a decoded ``data`` is 3-4x its
    JSON). Everything else behaves as a plain dataclass: the same constructor, fields,
    equality (``data`` compared decoded), ``repr`` and pickling.
    """

    __slots__ = ("_data", "_raw", "extra", "seq", "source_event_seqs", "surface_op", "time", "type")
    __match_args__ = ("type", "seq", "time", "data", "surface_op", "source_event_seqs", "extra")

    type: str
    seq: int
    time: int
    surface_op: Any
    source_event_seqs: list[int] | None
    extra: dict[str, Any] | None
    _data: dict[str, Any]
    _raw: str | bytes | None
    """The JSON text of ``data`` while it is not decoded yet, else ``None``."""

    def __init__(
        self,
        type: str,
        seq: int,
        time: int,
        data: dict[str, Any],
        surface_op: Any = None,
        source_event_seqs: list[int] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.type = type
        self.seq = seq
        self.time = time
        self._data = data
        self._raw = None
        self.surface_op = surface_op
        self.source_event_seqs = source_event_seqs
        self.extra = extra

    @property
    def data(self) -> dict[str, Any]:
        """The event's data object (decoded from its JSON text on first access)."""
        raw = self._raw
        if raw is None:
            return self._data
        data: dict[str, Any] = _loads(raw)
        # No call between the check and the store: a thread switch cannot land there, so
        # two threads decoding at once still hand out one dict (the first one stored).
        if self._raw is None:
            return self._data
        self._data, self._raw = data, None
        return data

    @data.setter
    def data(self, value: dict[str, Any]) -> None:
        self._data, self._raw = value, None

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Event)
        return (
            self.type == other.type
            and self.seq == other.seq
            and self.time == other.time
            and self.data == other.data
            and self.surface_op == other.surface_op
            and self.source_event_seqs == other.source_event_seqs
            and self.extra == other.extra
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it replaces

    def __repr__(self) -> str:
        return (
            f"Event(type={self.type!r}, seq={self.seq!r}, time={self.time!r}, "
            f"data={self.data!r}, surface_op={self.surface_op!r}, "
            f"source_event_seqs={self.source_event_seqs!r}, extra={self.extra!r})"
        )

    def __getstate__(self) -> tuple[Any, ...]:
        return (
            self.type,
            self.seq,
            self.time,
            self.data,
            self.surface_op,
            self.source_event_seqs,
            self.extra,
        )

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.__init__(*state)

    def to_json(self) -> dict[str, Any]:
        """The wire object, keys in the canonical order."""
        out: dict[str, Any] = {
            "type": self.type,
            "seq": self.seq,
            "time": self.time,
            "data": self.data,
        }
        # upstream's order (its logs and its SQLite ``rowToEvent``): seqs, then the op
        if self.source_event_seqs is not None:
            out["sourceEventSeqs"] = self.source_event_seqs
        if self.surface_op is not None:
            out["surfaceOp"] = self.surface_op
        if self.extra:
            out.update(self.extra)
        return out

    def with_seq(self, seq: int) -> Event:
        """A copy renumbered to ``seq`` (used when a seed is copied into a new log); it
        shares ``data`` with this event."""
        return Event(
            self.type,
            seq,
            self.time,
            self.data,
            self.surface_op,
            self.source_event_seqs,
            self.extra,
        )


# Strings up to this length are shared when a loaded event's data is decoded: keys, chunk
# and block types, names and short deltas repeat across a log; longer texts rarely do.
_SHARED_VALUE_CHARS = 16


def _shared_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object from its pairs exactly as the plain decoder builds it, its keys and short
    string values interned: ``json`` shares keys only within one call, and a decoded log
    would otherwise hold a copy of ``"turn"``, ``"chunk"``… per event. ``sys.intern`` keeps
    no string alive that no event uses any more."""
    intern = sys.intern
    limit = _SHARED_VALUE_CHARS
    return {
        intern(k): (intern(v) if v.__class__ is str and len(v) <= limit else v) for k, v in pairs
    }


_DECODER = json.JSONDecoder(object_pairs_hook=_shared_pairs)


def _loads(raw: str | bytes) -> Any:
    return _DECODER.decode(raw if raw.__class__ is str else raw.decode("utf-8"))  # pyright: ignore


_new_event = Event.__new__


def event_from_raw(type: str, seq: int, time: int, raw: str | bytes) -> Event:
    """An event whose ``data`` is ``raw``, the JSON text of an object, decoded on first use.

    For stores' loaders only: ``raw`` must already be known to decode (with the log reader's
    rules: no NaN, not too deep) to a JSON object, because a later failure would have no file
    or line to name.
    """
    event = _new_event(Event)
    event.type = type
    event.seq = seq
    event.time = time
    event._raw = raw  # pyright: ignore[reportPrivateUsage]
    event.surface_op = event.source_event_seqs = event.extra = None
    return event


@dataclass(slots=True)
class SessionHeader:
    """The first line of a log. Optional fields are ``None`` in memory and absent on the wire."""

    id: str
    created_at: int
    version: int = FORMAT_VERSION
    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int | None = None
    origin: str | None = None
    delegation_depth: int | None = None
    extra: dict[str, Any] = field(default_factory=dict[str, Any])

    def to_json(self) -> dict[str, Any]:
        """The wire object: optional fields omitted, never null."""
        out: dict[str, Any] = {
            "type": "session",
            "version": self.version,
            "id": self.id,
            "createdAt": self.created_at,
        }
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.parent_session is not None:
            out["parentSession"] = self.parent_session
        if self.seed_length is not None:
            out["seedLength"] = self.seed_length
        if self.origin is not None:
            out["origin"] = self.origin
        if self.delegation_depth is not None:
            out["delegationDepth"] = self.delegation_depth
        out.update(self.extra)
        return out

    @property
    def effective_seed_length(self) -> int:
        """``seedLength`` with absence read as 0 (spawned children and primaries)."""
        return self.seed_length or 0


# --- constructors for the events this project writes (June-2026 shapes) ---------------------


def turn_start(seq: int, time: int, turn: int) -> Event:
    return Event(
        "turn/start",
        seq,
        time,
        {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}},
    )


def turn_end(seq: int, time: int, turn: int, kind: TurnEndKind, **details: Any) -> Event:
    """``turn/end``; ``details`` land beside ``kind`` (e.g. ``reason="session/cancel"``,
    ``step=1, message=…, code=…`` for errors)."""
    return Event("turn/end", seq, time, {"turn": turn, "reason": {"kind": kind, **details}})


def step_start(seq: int, time: int, turn: int, step: int) -> Event:
    return Event("step/start", seq, time, {"turn": turn, "step": step})


def step_end(seq: int, time: int, turn: int, step: int) -> Event:
    return Event("step/end", seq, time, {"turn": turn, "step": step})


def user_message(seq: int, time: int, text: str) -> Event:
    return Event(
        "user/message",
        seq,
        time,
        {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}},
    )


def assistant_chunk(seq: int, time: int, turn: int, step: int, chunk: Chunk) -> Event:
    return Event("assistant/chunk", seq, time, {"turn": turn, "step": step, "chunk": chunk})


def assistant_message(
    seq: int, time: int, turn: int, step: int, content: list[ContentBlock], usage: Usage | None
) -> Event:
    data: dict[str, Any] = {"turn": turn, "step": step, "content": content}
    if usage is not None:
        data["usage"] = usage
    return Event("assistant/message", seq, time, data)


def tool_call(
    seq: int, time: int, turn: int, step: int, call_id: str, name: str, arguments: str
) -> Event:
    return Event(
        "tool/call",
        seq,
        time,
        {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments},
    )


def tool_result(
    seq: int, time: int, turn: int, step: int, call_id: str, text: str, is_error: bool
) -> Event:
    return Event(
        "tool/result",
        seq,
        time,
        {
            "turn": turn,
            "step": step,
            "callId": call_id,
            "content": [{"type": "text", "text": text}],
            "isError": is_error,
        },
    )

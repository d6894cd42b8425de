"""Replay entries and their derivation from a recorded session log.

A recorded step's ``assistant/chunk`` events are exactly the chunks its ``stream()`` call
yielded, so grouping them and closing a group at each ``finish`` chunk rebuilds every call.
The entries (:class:`ChunksEntry`, :class:`ThrowEntry`, :class:`HangEntry`) and the
derivation are ``dsh_core``'s, the vocabulary every dsh script player shares; they are
re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dsh_core import (
    ChunksEntry,
    Event,
    HangEntry,
    ScriptEntry,
    ThrowEntry,
    UnterminatedCallError,
    read_log,
    read_log_text,
)
from dsh_core import derive_replay_script as derive_chunk_entries
from dsh_llm_replay._errors import UnterminatedGroupError

__all__ = [
    "ChunksEntry",
    "HangEntry",
    "ReplayEntry",
    "ReplayHeader",
    "ThrowEntry",
    "derive_replay_script",
    "parse_session_header",
    "parse_session_log",
]


@dataclass(frozen=True, slots=True)
class ReplayHeader:
    """What replay needs from a log's header.

    Attributes:
        id: the recorded session id.
        created_at: ``createdAt`` (epoch ms); children are ordered by it, then by id.
        seed_length: ``seedLength``, 0 when absent: how many leading events were inherited.
        parent_session: ``parentSession`` when the log is a child's.
    """

    id: str
    created_at: int
    seed_length: int = 0
    parent_session: str | None = None


ReplayEntry = ScriptEntry
"""One replayed ``stream()`` call: the entry vocabulary of ``dsh_core``'s script player."""


def parse_session_header(text: str, source: str = "<text>") -> ReplayHeader:
    """Read the header (first non-blank line) of a session log.

    Raises:
        dsh_core.LogFormatError: the header is missing or invalid, naming the line.
    """
    lines = text.split("\n")
    end = next((i for i, line in enumerate(lines) if line.strip()), len(lines) - 1)
    header = read_log(lines[: end + 1], source).header
    return ReplayHeader(
        header.id, header.created_at, header.effective_seed_length, header.parent_session
    )


def parse_session_log(text: str, source: str = "<text>") -> list[Event]:
    """The logical events after the header: packed rows expanded, missing seq/time filled.

    Raises:
        dsh_core.LogFormatError: a line is invalid JSON, not an object or not an event.
    """
    return read_log_text(text, source).events


def derive_replay_script(events: Iterable[Event], source: str = "<events>") -> list[ReplayEntry]:
    """One :class:`ChunksEntry` per recorded ``stream()`` call, in order
    (:func:`dsh_core.derive_replay_script`, with replay's error type).

    Only ``assistant/chunk`` events count. A call closes at its ``finish`` chunk, so retries
    within one step are separate entries. The chunk dicts are the parsed ones, not copies.

    Raises:
        UnterminatedGroupError: chunks of a call are cut off by a ``(turn, step)`` change or
            by the end of the log without a ``finish`` (a call that threw or was cancelled).
    """
    try:
        return list(derive_chunk_entries(events, source))
    except UnterminatedCallError as exc:
        raise UnterminatedGroupError(exc.source, exc.turn, exc.step, exc.chunks, exc.cut) from None

"""Replay entries and their derivation from a recorded session log.

A recorded step's ``assistant/chunk`` events are exactly the chunks its ``stream()`` call
yielded, so grouping them and closing a group at each ``finish`` chunk rebuilds every call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dsh_core import Chunk, Event, read_log, read_log_text
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


@dataclass(frozen=True, slots=True)
class ChunksEntry:
    """A call that streams ``chunks`` (ending with ``finish``) and returns."""

    chunks: tuple[Chunk, ...]


@dataclass(frozen=True, slots=True)
class ThrowEntry:
    """A call that streams ``chunks`` and then fails with a ``ModelError``."""

    chunks: tuple[Chunk, ...]
    message: str
    code: str
    status: int | None = None


@dataclass(frozen=True, slots=True)
class HangEntry:
    """A call that streams a partial text and then waits until it is cancelled.

    Attributes:
        ready_file: created (empty) once the partial text has reached the consumer, so an
            external driver can cancel deterministically: a relative path inside the
            process's working directory (anything else is refused, see ``_ready``); an
            existing file there keeps its bytes.
    """

    ready_file: str | None = None


ReplayEntry = ChunksEntry | ThrowEntry | HangEntry


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
    """One :class:`ChunksEntry` per recorded ``stream()`` call, in order.

    Only ``assistant/chunk`` events count. A call closes at its ``finish`` chunk, so retries
    within one step are separate entries. The chunk dicts are the parsed ones, not copies.

    Raises:
        UnterminatedGroupError: chunks of a call are cut off by a ``(turn, step)`` change or
            by the end of the log without a ``finish`` (a call that threw or was cancelled).
    """
    entries: list[ReplayEntry] = []
    group: list[Any] = []
    turn = step = 0
    for event in events:
        if event.type != "assistant/chunk":
            continue
        data = event.data
        if not group:
            turn, step = data["turn"], data["step"]
        elif data["turn"] != turn or data["step"] != step:
            raise UnterminatedGroupError(
                source,
                turn,
                step,
                len(group),
                f"turn {data['turn']}, step {data['step']} began (event seq {event.seq})",
            )
        chunk = data["chunk"]
        group.append(chunk)
        if chunk["type"] == "finish":
            entries.append(ChunksEntry(tuple(group)))
            group = []
    if group:
        raise UnterminatedGroupError(source, turn, step, len(group), "the end of the log")
    return entries

"""Deterministic, turn-sized batches of events for store tests and the crash harness.

Everything in a batch is a function of its first ``seq`` and its turn number, so a process
that only knows ``(first_seq, turn)`` can recompute the exact bytes another process wrote.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh_core._events import (
    Event,
    Usage,
    assistant_chunk,
    assistant_message,
    step_end,
    step_start,
    tool_call,
    tool_result,
    turn_end,
    turn_start,
    user_message,
)
from dsh_core._logformat import dumps_event
from dsh_core._session import Session

__all__ = ["TIME_BASE", "append_turns", "event_lines", "event_time", "synthetic_turn"]

TIME_BASE = 1_780_000_000_000


def event_time(seq: int) -> int:
    """The ``time`` of the event numbered ``seq`` in synthetic logs (epoch ms)."""
    return TIME_BASE + seq * 7


def synthetic_turn(first_seq: int, turn: int) -> list[Event]:
    """One whole turn (``turn/start`` … ``turn/end``) numbered from ``first_seq``.

    Its size varies with ``turn`` (between 12 and 33 events); texts include non-ASCII
    characters and JSON escapes so byte equality means something.
    """
    events: list[Event] = []

    def seq() -> int:
        return first_seq + len(events)

    def at() -> int:
        return event_time(seq())

    events.append(turn_start(seq(), at(), turn))
    events.append(user_message(seq(), at(), f'turn {turn}: héllo "wörld"\n\t✓ {first_seq}'))
    step = 1
    events.append(step_start(seq(), at(), turn, step))
    events.append(
        assistant_chunk(
            seq(), at(), turn, step, {"type": "block-start", "index": 0, "blockType": "text"}
        )
    )
    pieces = [f"piece {k} of turn {turn} — seq {first_seq}" for k in range(3 + turn % 19)]
    for piece in pieces:
        events.append(
            assistant_chunk(
                seq(), at(), turn, step, {"type": "text-delta", "index": 0, "text": piece}
            )
        )
    text = "".join(pieces)
    events.append(
        assistant_chunk(
            seq(),
            at(),
            turn,
            step,
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        )
    )  # pyright: ignore[reportArgumentType]
    usage: Usage = {
        "inputTokens": turn,
        "outputTokens": len(pieces),
        "cacheReadTokens": 0,
        "reasoningTokens": first_seq % 5,
    }
    events.append(assistant_chunk(seq(), at(), turn, step, {"type": "usage", "usage": usage}))
    events.append(
        assistant_chunk(
            seq(), at(), turn, step, {"type": "finish", "reason": {"kind": "tool-calls"}}
        )
    )
    call_id = f"call_{turn}_{first_seq}"
    events.append(
        assistant_message(seq(), at(), turn, step, [{"type": "text", "text": text}], usage)
    )
    events.append(
        tool_call(
            seq(), at(), turn, step, call_id, "bash", '{"command":"echo ' + str(first_seq) + '"}'
        )
    )
    events.append(tool_result(seq(), at(), turn, step, call_id, f"{first_seq}\n", False))
    events.append(step_end(seq(), at(), turn, step))
    events.append(turn_end(seq(), at(), turn, "completed"))
    return events


def event_lines(events: Sequence[Event]) -> list[str]:
    """Each event as its log line, for comparing events by the exact bytes a store keeps."""
    return [dumps_event(event) for event in events]


def append_turns(session: Session, count: int, first_turn: int = 1) -> list[Event]:
    """Append ``count`` whole synthetic turns, one flush (one store batch) per turn."""
    written: list[Event] = []
    for turn in range(first_turn, first_turn + count):
        for event in synthetic_turn(session.next_seq, turn):
            session.add(event)
            written.append(event)
        session.flush()
    return written

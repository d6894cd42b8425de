"""Upstream's ``core/session/tests/repair.spec.ts`` (June 2026): ``interruptedTurnClosers`` as
conformance cases for :func:`dsh_core.close_open_turn`. Ledger: COMPATIBILITY.md § "Upstream
unit tests"."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core import Event, close_open_turn


def _start(turn: int, seq: int) -> Event:
    data = {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}
    return Event("turn/start", seq, seq, data)


def _ev(kind: str, seq: int, **data: Any) -> Event:
    return Event(kind, seq, seq, data)


def _message(seq: int, turn: int, *call_ids: str, text: str | None = None) -> Event:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool-call", "id": c, "name": "bash", "arguments": "{}"} for c in call_ids]
    return _ev("assistant/message", seq, turn=turn, step=1, content=content)


def _result(seq: int, turn: int, call_id: str) -> Event:
    return _ev("tool/result", seq, turn=turn, step=1, callId=call_id, content=[], isError=False)


CASES: list[tuple[str, list[Event], list[str], list[str]]] = [
    (
        "returns nothing for a balanced log (ends on turn/end)",
        [_start(1, 0), _ev("turn/end", 1, turn=1, reason={"kind": "completed"})],
        [],
        [],
    ),
    ("returns nothing for an empty log", [], [], []),
    (
        "closes an open turn with no open step (turn/end {interrupted} only)",
        [_start(1, 0)],
        ["turn/end"],
        [],
    ),
    (
        "closes an open step before the turn (step/end then turn/end)",
        [_start(1, 0), _ev("step/start", 1, turn=1, step=1)],
        ["step/end", "turn/end"],
        [],
    ),
    (
        "synthesizes an error tool/result for a tool-call the crash left unanswered",
        [
            _start(2, 0),
            _ev("step/start", 1, turn=2, step=1),
            _message(2, 2, "call-1", text="calling a tool"),
        ],
        ["tool/result", "step/end", "turn/end"],
        ["call-1"],
    ),
    (
        "does NOT synthesize a result for a tool-call that already has one",
        [
            _start(2, 0),
            _ev("step/start", 1, turn=2, step=1),
            _message(2, 2, "call-1"),
            _result(3, 2, "call-1"),
        ],
        ["step/end", "turn/end"],
        [],
    ),
    (
        "does NOT synthesize a result after the owning step already closed",
        [
            _start(2, 0),
            _ev("step/start", 1, turn=2, step=1),
            _message(2, 2, "call-1"),
            _ev("step/end", 3, turn=2, step=1),
        ],
        ["turn/end"],
        [],
    ),
    (
        "synthesizes results only for the still-open turn, not a committed earlier turn",
        [
            _start(1, 0),
            _ev("step/start", 1, turn=1, step=1),
            _message(2, 1, "old-call"),
            _result(3, 1, "old-call"),
            _ev("step/end", 4, turn=1, step=1),
            _ev("turn/end", 5, turn=1, reason={"kind": "completed"}),
            _start(2, 6),
            _ev("step/start", 7, turn=2, step=1),
            _message(8, 2, "new-call"),
        ],
        ["tool/result", "step/end", "turn/end"],
        ["new-call"],
    ),
    (
        "synthesizes a result for each of multiple unanswered calls, in log order",
        [
            _start(1, 0),
            _ev("step/start", 1, turn=1, step=1),
            _message(2, 1, "call-a", "call-b", "call-c"),
            _result(3, 1, "call-b"),
        ],
        ["tool/result", "tool/result", "step/end", "turn/end"],
        ["call-a", "call-c"],
    ),
]


@pytest.mark.parametrize(("case", "events", "types", "answered"), CASES)
def test_interrupted_turn_closers(
    case: str, events: list[Event], types: list[str], answered: list[str]
) -> None:
    closers = close_open_turn(events)
    assert [e.type for e in closers] == types, case
    # Contiguous seqs after the last event, stamped with its time (deterministic).
    assert [e.seq for e in closers] == list(range(len(events), len(events) + len(closers)))
    assert all(e.time == events[-1].time for e in closers)
    results = [e.data for e in closers if e.type == "tool/result"]
    assert [r["callId"] for r in results] == answered
    for result in results:
        assert result["isError"] is True
        assert result["error"] == {"name": "InterruptedError", "code": "interrupted"}
        assert result["content"] == [
            {"type": "text", "text": "Tool call interrupted by a crash; no result was recorded."}
        ]
    if closers:
        open_turn = [e.data["turn"] for e in events if e.type == "turn/start"][-1]
        assert closers[-1].data == {"turn": open_turn, "reason": {"kind": "interrupted"}}

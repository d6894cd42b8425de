"""``Session``, ``prepare_header`` and the log-shape helpers behind crash repair."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from dsh_core import (
    CreateOptions,
    Event,
    SeqError,
    Session,
    SessionHeader,
    SessionMeta,
    close_open_turn,
    completed_turn_prefix,
    new_created_at,
    prepare_header,
    step_end,
    step_start,
    tool_call,
    tool_result,
    turn_end,
    turn_start,
)
from dsh_core.testing import InMemorySessionStore, synthetic_turn


class _Recorder:
    """A writer that keeps batches, refusing those it is told to."""

    def __init__(self, refuse: int = 0) -> None:
        self.batches: list[list[Event]] = []
        self.refuse = refuse
        self.closed = 0

    def append(self, events: Sequence[Event]) -> None:
        if self.refuse:
            self.refuse -= 1
            raise SeqError("refused")
        self.batches.append(list(events))

    def close(self) -> None:
        self.closed += 1


HEADER = SessionHeader(id="s", created_at=1)


# --- Session -----------------------------------------------------------------------------------


def test_session_validates_that_seq_equals_index() -> None:
    Session(HEADER, synthetic_turn(0, 1), _Recorder())
    bad = synthetic_turn(0, 1)
    bad[4] = bad[4].with_seq(5)
    with pytest.raises(SeqError, match="event 4 has seq 5"):
        Session(HEADER, bad, _Recorder())
    with pytest.raises(SeqError):
        Session(HEADER, synthetic_turn(1, 1), _Recorder())


def test_record_and_add_number_events_and_flush_batches_them() -> None:
    writer = _Recorder()
    session = Session(HEADER, synthetic_turn(0, 1), writer)
    n = session.next_seq
    recorded = session.record("note", {"a": 1}, time=5)
    assert (recorded.seq, recorded.time) == (n, 5)
    with pytest.raises(SeqError, match=f"expected seq {n + 1}"):
        session.add(turn_start(n + 2, 0, 2))
    session.add(turn_start(n + 1, 0, 2))
    now = session.record("note", {})
    assert now.time > 1_700_000_000_000  # wall clock
    session.flush()
    session.flush()  # nothing pending: no empty batch
    assert [[e.seq for e in b] for b in writer.batches] == [[n, n + 1, n + 2]]
    assert session.id == "s"
    assert len(session.events) == n + 3


def test_refused_flush_keeps_the_batch_pending() -> None:
    writer = _Recorder(refuse=1)
    session = Session(HEADER, [], writer)
    session.record("a", {}, time=0)
    with pytest.raises(SeqError):
        session.flush()
    session.record("b", {}, time=0)
    session.flush()
    assert [[e.type for e in b] for b in writer.batches] == [["a", "b"]]


def test_close_flushes_once_and_releases_even_when_the_flush_fails() -> None:
    writer = _Recorder(refuse=1)
    session = Session(HEADER, [], writer)
    session.record("a", {}, time=0)
    with pytest.raises(SeqError):
        session.close()
    assert writer.closed == 1
    session.close()
    assert writer.closed == 1


# --- prepare_header ----------------------------------------------------------------------------


def test_prepare_header_copies_meta_and_never_infers_seed_length() -> None:
    seed = synthetic_turn(0, 1)
    header = prepare_header(
        CreateOptions(
            "id",
            seed,
            SessionMeta(
                created_at=9, cwd="/w", parent_session="p", origin="subagent", delegation_depth=1
            ),
        )
    )
    assert header == SessionHeader(
        id="id", created_at=9, cwd="/w", parent_session="p", origin="subagent", delegation_depth=1
    )
    assert header.seed_length is None
    given = prepare_header(CreateOptions("id", seed, SessionMeta(created_at=9, seed_length=3)))
    assert given.seed_length == 3


def test_prepare_header_fills_id_and_created_at() -> None:
    first, second = prepare_header(CreateOptions()), prepare_header(CreateOptions())
    assert first.id != second.id
    assert len(first.id) == 36
    assert first.created_at < second.created_at


@pytest.mark.parametrize(
    ("meta", "field"),
    [
        (SessionMeta(seed_length=-1), "seedLength"),
        (SessionMeta(delegation_depth=-2), "delegationDepth"),
        (SessionMeta(created_at=-1), "createdAt"),
        (SessionMeta(seed_length=True), "seedLength"),
        (SessionMeta(seed_length=1.5), "seedLength"),  # pyright: ignore[reportArgumentType]
        (SessionMeta(cwd=3), "cwd"),  # pyright: ignore[reportArgumentType]
    ],
)
def test_prepare_header_refuses_what_the_reader_would_refuse(meta: SessionMeta, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        prepare_header(CreateOptions(meta=meta))


def test_new_created_at_is_strictly_increasing() -> None:
    stamps = [new_created_at() for _ in range(500)]
    assert stamps == sorted(set(stamps))


# --- completed_turn_prefix ---------------------------------------------------------------------


def test_completed_turn_prefix() -> None:
    one = synthetic_turn(0, 1)
    two = synthetic_turn(len(one), 2)
    assert completed_turn_prefix([]) == []
    assert completed_turn_prefix(one[:-1]) == []
    assert completed_turn_prefix(one) == one
    assert completed_turn_prefix([*one, *two[:3]]) == one
    assert completed_turn_prefix([*one, *two]) == [*one, *two]


# --- close_open_turn -----------------------------------------------------------------------


def _types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


def test_nothing_to_close() -> None:
    one = synthetic_turn(0, 1)
    assert close_open_turn([]) == []
    assert close_open_turn(one) == []
    assert close_open_turn([Event("session/end-seed", 0, 0, {})]) == []


def test_open_turn_without_step() -> None:
    events = [turn_start(0, 0, 3)]
    closers = close_open_turn(events, time=42)
    assert [e.to_json() for e in closers] == [
        {
            "type": "turn/end",
            "seq": 1,
            "time": 42,
            "data": {"turn": 3, "reason": {"kind": "interrupted"}},
        }
    ]


def test_open_step_with_pending_calls_in_order() -> None:
    events = [
        turn_start(0, 0, 2),
        step_start(1, 0, 2, 1),
        tool_call(2, 0, 2, 1, "b", "x", "{}"),
        tool_call(3, 0, 2, 1, "a", "x", "{}"),
        tool_call(4, 0, 2, 1, "c", "x", "{}"),
        tool_result(5, 0, 2, 1, "a", "ok", False),
    ]
    closers = close_open_turn(events, time=7)
    assert _types(closers) == ["tool/result", "tool/result", "step/end", "turn/end"]
    assert [e.seq for e in closers] == [6, 7, 8, 9]
    assert [e.data["callId"] for e in closers[:2]] == ["b", "c"]
    assert all(
        e.data["isError"] is True and e.data["turn"] == 2 and e.data["step"] == 1
        for e in closers[:2]
    )
    assert closers[2].data == {"turn": 2, "step": 1}
    assert all(e.time == 7 for e in closers)


def test_a_call_of_a_closed_step_is_not_answered_by_the_repair() -> None:
    # Upstream's interruptedTurnClosers repairs only the step the crash interrupted.
    events = [
        turn_start(0, 0, 1),
        step_start(1, 0, 1, 1),
        tool_call(2, 0, 1, 1, "k", "x", "{}"),
        step_end(3, 0, 1, 1),
        step_start(4, 0, 1, 2),
        step_end(5, 0, 1, 2),
    ]
    closers = close_open_turn(events, time=0)
    assert _types(closers) == ["turn/end"]


def test_only_the_last_turn_counts() -> None:
    events = [
        turn_start(0, 0, 1),
        tool_call(1, 0, 1, 1, "old", "x", "{}"),
        turn_end(2, 0, 1, "error"),
        turn_start(3, 0, 2),
    ]
    closers = close_open_turn(events, time=0)
    assert _types(closers) == ["turn/end"]
    assert closers[0].data["turn"] == 2


@pytest.mark.parametrize(
    ("turn_data", "call_data", "turn"),
    [
        ({}, {"callId": "c"}, 1),
        ({"turn": "two"}, {"callId": "c", "step": "one"}, 1),
        ({"turn": 5}, {"callId": "c", "step": None}, 5),
    ],
)
def test_foreign_shapes_do_not_hide_an_open_turn(
    turn_data: dict[str, Any], call_data: dict[str, Any], turn: int
) -> None:
    events = [
        Event("turn/start", 0, 0, turn_data),
        Event("step/start", 1, 0, {"turn": turn}),
        Event("tool/call", 2, 0, call_data),
    ]
    closers = close_open_turn(events, time=0)
    assert _types(closers) == ["tool/result", "step/end", "turn/end"]
    assert closers[-1].data["turn"] == turn
    assert closers[0].data["step"] == 1


def test_closers_continue_a_store_log() -> None:
    store = InMemorySessionStore()
    session = store.create(CreateOptions("s"))
    for event in [turn_start(0, 0, 1), step_start(1, 0, 1, 1)]:
        session.add(event)
    session.close()
    resumed = store.resume("s")
    assert _types(list(resumed.events)) == ["turn/start", "step/start", "step/end", "turn/end"]
    assert close_open_turn(resumed.events) == []
    resumed.close()

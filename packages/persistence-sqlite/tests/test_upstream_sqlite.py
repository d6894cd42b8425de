"""Upstream's ``session-persistence-sqlite/tests/sqlite.spec.ts`` (June 2026) as conformance
cases for :class:`SqliteSessionStore`: the crash-tail scan over rows (``scanRows``), interrupted
turns kept and closed, schema versions refused, batches all-or-nothing. Ledger: COMPATIBILITY.md
§ "Upstream unit tests".

Upstream's ``load()`` writes the closers; ours reads without writing (DESIGN §5: ``load`` closes
in the view, ``resume`` durably), so the "closed on disk" cases run against ``resume``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    CreateOptions,
    Event,
    LogFormatError,
    SeqError,
    SessionBusyError,
    SessionMeta,
    StoreVersionError,
)
from dsh_persistence_sqlite import SCHEMA_VERSION, SqliteSessionStore

_USER = {"kind": "user"}
_COMPLETED = {"kind": "completed"}


def _start(turn: int) -> dict[str, Any]:
    return {"turn": turn, "trigger": {"kind": "message", "source": _USER}}


def _one_turn_log() -> list[Event]:
    """Upstream's ``oneTurnLog()``: a well-formed turn, seqs 0..5."""
    return [
        Event("turn/start", 0, 1, _start(1)),
        Event("user/message", 1, 2, {"content": [{"type": "text", "text": "hi"}], "source": _USER}),
        Event("step/start", 2, 3, {"turn": 1, "step": 1}),
        Event(
            "assistant/message",
            3,
            4,
            {"turn": 1, "step": 1, "content": [{"type": "text", "text": "hello"}]},
        ),
        Event("step/end", 4, 5, {"turn": 1, "step": 1}),
        Event("turn/end", 5, 6, {"turn": 1, "reason": _COMPLETED}),
    ]


def _row(event: Event) -> tuple[int, str, int, str]:
    return (event.seq, event.type, event.time, json.dumps(event.data))


_ONE_TURN_ROWS = [_row(e) for e in _one_turn_log()]
_TURN_2 = [
    Event("turn/start", 6, 7, _start(2)),
    Event("step/start", 7, 8, {"turn": 2, "step": 1}),
]


def _stored(path: Path, session_id: str, rows: list[tuple[int, str, int, str]]) -> None:
    """A session whose ``events`` rows are exactly ``rows``, written as a hand edit would."""
    with SqliteSessionStore(path) as store:
        store.create(CreateOptions(session_id, meta=SessionMeta(created_at=1000))).close()
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.executemany(
            "INSERT INTO events (session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
            [(session_id, *row) for row in rows],
        )
    finally:
        connection.close()


def _stored_seqs(path: Path, session_id: str) -> list[tuple[int, str]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(
            "SELECT seq, type FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
    finally:
        connection.close()


# describe('scanRows'): kept = the stored events load preserves; the rest is the crash tail
@pytest.mark.parametrize(
    ("case", "rows", "kept"),
    [
        (
            "preserves the full log when it ends exactly on a turn/end",
            _ONE_TURN_ROWS,
            [0, 1, 2, 3, 4, 5],
        ),
        (
            "PRESERVES the real events of an interrupted turn after the last turn/end",
            _ONE_TURN_ROWS + [_row(e) for e in _TURN_2],
            [0, 1, 2, 3, 4, 5, 6, 7],
        ),
        (
            "preserves the contiguous prefix and flags a torn tail at a seq gap",
            [
                (0, "turn/start", 1, json.dumps(_start(1))),
                (2, "step/start", 2, json.dumps({"turn": 1, "step": 1})),
            ],
            [0],
        ),
        ("an empty log preserves nothing and has no torn tail", [], []),
        (
            "tolerates an unparsable torn-tail row after the last turn/end",
            [*_ONE_TURN_ROWS, (6, "turn/start", 7, "{not json")],
            [0, 1, 2, 3, 4, 5],
        ),
    ],
)
def test_the_crash_tail_after_the_last_turn_end_is_cut(
    tmp_path: Path, case: str, rows: list[tuple[int, str, int, str]], kept: list[int]
) -> None:
    path = tmp_path / "sessions.db"
    _stored(path, "s", rows)
    with SqliteSessionStore(path) as store:
        events = store.load("s").events
        assert [e.seq for e in events[: len(kept)]] == kept, case
        assert [e.time for e in events[: len(kept)]] == [row[2] for row in rows[: len(kept)]]
        # whatever follows is the synthetic close of an open turn, never a stored tail row
        assert all(e.time == events[len(kept) - 1].time for e in events[len(kept) :]) or not kept
        if events[len(kept) :]:
            assert events[-1].type == "turn/end"
            assert events[-1].data["reason"] == {"kind": "interrupted"}
        assert len(_stored_seqs(path, "s")) == len(rows), "load wrote to the store"
        # resume makes the cut durable: the tail rows are gone, the closers stored
        session = store.resume("s")
        session.close()
        assert [seq for seq, _ in _stored_seqs(path, "s")] == [e.seq for e in events]


@pytest.mark.parametrize(
    ("case", "rows", "field"),
    [
        (
            "throws on a seq gap inside the committed region (before the last turn/end)",
            [
                (0, "turn/start", 1, json.dumps(_start(1))),
                (2, "step/start", 2, json.dumps({"turn": 1, "step": 1})),
                (3, "turn/end", 3, json.dumps({"turn": 1, "reason": _COMPLETED})),
            ],
            "events[seq=2].seq",
        ),
        (
            "throws on an unparsable row inside the committed region",
            [
                (0, "turn/start", 1, "{not json"),
                (1, "turn/end", 2, json.dumps({"turn": 1, "reason": _COMPLETED})),
            ],
            "events[seq=0].data",
        ),
    ],
)
def test_damage_in_the_committed_region_is_refused_and_kept(
    tmp_path: Path, case: str, rows: list[tuple[int, str, int, str]], field: str
) -> None:
    path = tmp_path / "sessions.db"
    _stored(path, "s", rows)
    with SqliteSessionStore(path) as store:
        for read in (store.load, store.resume):
            with pytest.raises(LogFormatError) as caught:
                read("s")
            assert caught.value.field == field, case
    assert len(_stored_seqs(path, "s")) == len(rows)


# describe('SessionPersistenceSqlite: durability and crash semantics')
def _create(store: SqliteSessionStore, session_id: str, cwd: str | None = None) -> Any:
    return store.create(CreateOptions(session_id, meta=SessionMeta(created_at=1000, cwd=cwd)))


def test_an_interrupted_turn_is_preserved_and_closed_then_appends_continue(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    with SqliteSessionStore(path) as store:
        session = _create(store, "crash")
        for event in _one_turn_log() + _TURN_2:
            session.add(event)
        session.flush()
        session.close()
    with SqliteSessionStore(path) as store:
        loaded = store.load("crash").events
        assert [e.type for e in loaded] == [
            "turn/start", "user/message", "step/start", "assistant/message", "step/end",
            "turn/end", "turn/start", "step/start", "step/end", "turn/end",
        ]  # fmt: skip
        assert [e.seq for e in loaded] == list(range(10))
        assert loaded[-1].data["reason"] == {"kind": "interrupted"}
        session = store.resume("crash")  # closes the turn durably: the next append is seq 10
        session.add(Event("turn/start", 10, 9, _start(3)))
        session.add(Event("turn/end", 11, 10, {"turn": 3, "reason": _COMPLETED}))
        session.flush()
        session.close()
        assert [e.seq for e in store.load("crash").events] == list(range(12))


def test_resume_durably_closes_a_hand_written_interrupted_turn(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    _stored(path, "load-closes", [*_ONE_TURN_ROWS, (6, "turn/start", 7, json.dumps(_start(2)))])
    with SqliteSessionStore(path) as store:
        assert [e.seq for e in store.load("load-closes").events] == list(range(8))
        store.resume("load-closes").close()
    stored = _stored_seqs(path, "load-closes")
    assert [seq for seq, _ in stored] == list(range(8))
    assert stored[-1][1] == "turn/end"


def test_a_session_whose_only_turn_never_closed_is_preserved_and_listed(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with SqliteSessionStore(path) as store:
        session = _create(store, "all-tail")
        for event in _one_turn_log()[:2]:
            session.add(event)
        session.flush()
        session.close()
    with SqliteSessionStore(path) as store:
        loaded = store.load("all-tail").events
        assert [e.type for e in loaded] == ["turn/start", "user/message", "turn/end"]
        assert loaded[-1].data["reason"] == {"kind": "interrupted"}
        assert "all-tail" in [h.id for h in store.list_sessions()]


@pytest.mark.parametrize("found", [SCHEMA_VERSION + 1, 1], ids=["newer", "older"])
def test_a_database_of_another_schema_version_is_refused(tmp_path: Path, found: int) -> None:
    path = tmp_path / "sessions.db"
    SqliteSessionStore(path).close()
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version = {found}")
    connection.close()
    before = path.read_bytes()
    with pytest.raises(StoreVersionError, match=str(found)):
        SqliteSessionStore(path)
    assert path.read_bytes() == before


def test_a_corrupt_row_in_the_uncommitted_tail_is_discarded(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    _stored(path, "corrupt-tail", [*_ONE_TURN_ROWS, (6, "turn/start", 7, "{not valid json")])
    with SqliteSessionStore(path) as store:
        assert store.load("corrupt-tail").events == _one_turn_log()
        session = store.resume("corrupt-tail")  # deletes the torn row: appends continue at 6
        session.add(Event("turn/start", 6, 8, _start(2)))
        session.add(Event("turn/end", 7, 9, {"turn": 2, "reason": _COMPLETED}))
        session.flush()
        session.close()
        assert [e.seq for e in store.load("corrupt-tail").events] == list(range(8))


def test_a_batch_restating_stored_seqs_is_refused_whole(tmp_path: Path) -> None:
    with SqliteSessionStore(tmp_path / "sessions.db") as store:
        session = _create(store, "rollback")
        for event in _one_turn_log():
            session.add(event)
        session.flush()
        writer: Any = session._writer  # pyright: ignore[reportPrivateUsage]
        with pytest.raises(SeqError):
            writer.append(_one_turn_log())
        session.close()
        assert store.load("rollback").events == _one_turn_log()


def test_a_session_persists_across_store_instances_over_one_file(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with SqliteSessionStore(path) as store:
        session = _create(store, "persist", cwd="/proj")
        for event in _one_turn_log():
            session.add(event)
        session.flush()
        session.close()
    with SqliteSessionStore(path) as store:
        assert "persist" in [h.id for h in store.list_sessions()]
        loaded = store.load("persist")
        assert (loaded.header.id, loaded.header.cwd) == ("persist", "/proj")
        assert loaded.events == _one_turn_log()


# describe('SessionPersistenceSqlite: edge cases')
def test_a_second_store_cannot_append_behind_the_first_writers_back(tmp_path: Path) -> None:
    # upstream: a second instance with a stale cursor hits UNIQUE(session_id, seq) and rolls
    # back; ours holds one writer per session, so the second writer is refused outright and a
    # stale batch through the first is refused before any row is written
    path = tmp_path / "sessions.db"
    with SqliteSessionStore(path) as first, SqliteSessionStore(path) as second:
        session = _create(first, "rollback-insert")
        for event in _one_turn_log():
            session.add(event)
        session.flush()
        with pytest.raises(SessionBusyError):
            second.resume("rollback-insert")
        turn_2 = [
            Event("turn/start", 6, 7, _start(2)),
            Event("turn/end", 7, 8, {"turn": 2, "reason": _COMPLETED}),
        ]
        for event in turn_2:
            session.add(event)
        session.flush()
        writer: Any = session._writer  # pyright: ignore[reportPrivateUsage]
        with pytest.raises(SeqError):
            writer.append(turn_2)
        session.close()
        assert [e.seq for e in second.load("rollback-insert").events] == list(range(8))

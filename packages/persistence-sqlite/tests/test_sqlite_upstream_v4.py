"""Schema version 4 means upstream's v4: files upstream writes open here, and the v4 files
we write have exactly the layout upstream's v4 opens, losslessly both ways; what v4 has no
column for lives in side tables upstream's v4 never reads and its deletes cascade into.

The upstream side is built by hand from the layout documented in upstream's
``session-persistence-sqlite/src/schema.ts`` (the v4 commit, ``../shared/upstream-src/v4``):
its DDL, its ``PRAGMA`` sequence, and the rows its ``writeRow`` / ``appendBatch`` bind
(``JSON.stringify`` of ``data``, of ``sourceEventSeqs`` and of ``surfaceOp``). Nothing on that
side goes through our writer.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_core import CreateOptions, Event, SessionMeta, StoreCorruptError, read_log_text
from dsh_persistence_sqlite import Layout, SqliteSessionStore

# upstream's openDatabase(), statement for statement
UPSTREAM_V4_DDL = [
    """
    CREATE TABLE IF NOT EXISTS sessions (
      id             TEXT PRIMARY KEY,
      version        INTEGER NOT NULL,
      created_at     INTEGER NOT NULL,
      cwd            TEXT,
      parent_session TEXT,
      seed_length    INTEGER
    ) STRICT
    """,
    """
    CREATE TABLE IF NOT EXISTS events (
      session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
      seq               INTEGER NOT NULL,
      type              TEXT NOT NULL,
      time              INTEGER NOT NULL,
      data              TEXT NOT NULL,
      source_event_seqs TEXT,
      surface_op        TEXT,
      PRIMARY KEY (session_id, seq)
    ) STRICT
    """,
]


def _stringify(value: Any) -> str:
    """``JSON.stringify`` for the values used here: compact, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _upstream_open(path: Path) -> sqlite3.Connection:
    """What upstream's ``openDatabase(path, 'wal')`` does, in its order."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute("PRAGMA journal_mode = WAL")
    on_disk = connection.execute("PRAGMA user_version").fetchone()[0]
    if on_disk not in (0, 4):
        connection.close()
        raise AssertionError(f"upstream v4 refuses schema version {on_disk}")
    if on_disk == 0:
        connection.execute("PRAGMA user_version = 4")
    for statement in UPSTREAM_V4_DDL:
        connection.execute(statement)
    return connection


_USER = {"kind": "user"}

# Two sessions as upstream's v4 writes them: a primary, and a fork child with a seed boundary
# whose events carry the surface columns. Header fields: rowToMeta's; event fields: rowToEvent's.
PRIMARY: dict[str, Any] = {"version": 0, "id": "p-1", "createdAt": 1_782_000_000_000, "cwd": "/w ö"}
CHILD: dict[str, Any] = {
    "version": 0,
    "id": "c-1",
    "createdAt": 1_782_000_000_500,
    "cwd": "/w ö",
    "parentSession": "p-1",
    "seedLength": 3,
}


def _event(kind: str, seq: int, data: dict[str, Any], **surface: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": seq + 1, "data": data, **surface}


def _turn(seq: int, turn: int) -> list[dict[str, Any]]:
    return [
        _event("turn/start", seq, {"turn": turn, "trigger": {"kind": "message", "source": _USER}})
    ]


def _end(seq: int, turn: int) -> dict[str, Any]:
    return _event("turn/end", seq, {"turn": turn, "reason": {"kind": "completed"}})


_HELLO = {"content": [{"type": "text", "text": "héllo — 世界"}], "source": _USER}
PRIMARY_EVENTS = [*_turn(0, 1), _event("user/message", 1, _HELLO), _end(2, 1)]
CHILD_EVENTS = [
    *PRIMARY_EVENTS,
    *_turn(3, 2),
    _event(
        "assistant/text", 4, {"text": "ok", "n": 1.5}, sourceEventSeqs=[1, 2], surfaceOp="append"
    ),
    _event(
        "assistant/text",
        5,
        {"text": "OK"},
        sourceEventSeqs=[],
        surfaceOp={"op": "replace", "start": 0, "end": 2},
    ),
    _end(6, 2),
]


def _upstream_write(path: Path, header: dict[str, Any], events: list[dict[str, Any]]) -> None:
    """Upstream's first materialising ``appendBatch``: the sessions row, then every event."""
    connection = _upstream_open(path)
    try:
        connection.execute("BEGIN")
        connection.execute(
            "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                header["id"],
                header["version"],
                header["createdAt"],
                header.get("cwd"),
                header.get("parentSession"),
                header.get("seedLength"),
            ),
        )
        for event in events:
            seqs = event.get("sourceEventSeqs")
            op = event.get("surfaceOp")
            connection.execute(
                "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, "
                "surface_op) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    header["id"],
                    event["seq"],
                    event["type"],
                    event["time"],
                    _stringify(event["data"]),
                    None if seqs is None else _stringify(seqs),
                    None if op is None else _stringify(op),
                ),
            )
        connection.execute("COMMIT")
    finally:
        connection.close()


def _upstream_read(path: Path) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every session as upstream's ``list`` + ``readPrefix`` see it (``rowToMeta``,
    ``rowToEvent``), after its ``openDatabase`` accepted the file."""
    connection = _upstream_open(path)
    connection.row_factory = sqlite3.Row
    try:
        out: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
        for row in connection.execute("SELECT * FROM sessions"):
            assert set(row.keys()) == {
                "id", "version", "created_at", "cwd", "parent_session", "seed_length"
            }  # fmt: skip
            meta: dict[str, Any] = {
                "version": row["version"],
                "id": row["id"],
                "createdAt": row["created_at"],
            }
            for column, key in (
                ("cwd", "cwd"),
                ("parent_session", "parentSession"),
                ("seed_length", "seedLength"),
            ):
                if row[column] is not None:
                    meta[key] = row[column]
            events: list[dict[str, Any]] = []
            for event_row in connection.execute(
                "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events "
                "WHERE session_id = ? ORDER BY seq",
                (row["id"],),
            ):
                event: dict[str, Any] = {
                    "type": event_row["type"],
                    "seq": event_row["seq"],
                    "time": event_row["time"],
                    "data": json.loads(event_row["data"]),
                }
                if event_row["source_event_seqs"] is not None:
                    event["sourceEventSeqs"] = json.loads(event_row["source_event_seqs"])
                if event_row["surface_op"] is not None:
                    event["surfaceOp"] = json.loads(event_row["surface_op"])
                events.append(event)
            out[row["id"]] = (meta, events)
        return out
    finally:
        connection.close()


def _read_only(path: Path) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True))


def _layout_facts(path: Path) -> list[tuple[Any, ...]]:
    """The layout as SQLite reports it: tables (strictness), columns, keys, foreign keys."""
    with _read_only(path) as connection:
        facts: list[tuple[Any, ...]] = [
            ("user_version", connection.execute("PRAGMA user_version").fetchone()[0]),
            ("application_id", connection.execute("PRAGMA application_id").fetchone()[0]),
        ]
        for name, strict in connection.execute(
            "SELECT name, strict FROM pragma_table_list WHERE schema = 'main' "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ):
            facts.append(("table", name, strict))
            facts.extend(
                ("column", name, *row)
                for row in connection.execute(
                    'SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)',
                    (name,),
                )
            )
            facts.extend(
                ("fk", name, *row)
                for row in connection.execute(
                    'SELECT "table", "from", "to", on_delete FROM pragma_foreign_key_list(?)',
                    (name,),
                )
            )
        return facts


def _rows(path: Path) -> list[tuple[Any, ...]]:
    with _read_only(path) as connection:
        return [
            *connection.execute("SELECT * FROM sessions ORDER BY id"),
            *connection.execute("SELECT * FROM events ORDER BY session_id, seq"),
        ]


def _log_text(header: dict[str, Any], events: list[dict[str, Any]]) -> str:
    lines = [{"type": "session", **header}, *events]
    return "".join(_stringify(line) + "\n" for line in lines)


@pytest.fixture
def upstream_db(tmp_path: Path) -> Path:
    path = tmp_path / "upstream" / "sessions.db"
    path.parent.mkdir()
    _upstream_write(path, PRIMARY, PRIMARY_EVENTS)
    _upstream_write(path, CHILD, CHILD_EVENTS)
    return path


def test_we_open_upstreams_v4_file_and_read_everything_it_holds(upstream_db: Path) -> None:
    with SqliteSessionStore(upstream_db) as store:
        assert store.layout is Layout.V4
        assert [h.to_json() for h in store.list_sessions()] == [
            {"type": "session", **PRIMARY},
            {"type": "session", **CHILD},
        ]
        for header, events in ((PRIMARY, PRIMARY_EVENTS), (CHILD, CHILD_EVENTS)):
            assert store.export_jsonl(header["id"]) == _log_text(header, events)
            log = store.load(header["id"])
            assert read_log_text(_log_text(header, events)).events == log.events


def test_v4_layout_we_create_is_upstreams_exactly(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.db"
    _upstream_open(theirs).close()
    ours = tmp_path / "ours.db"
    SqliteSessionStore(ours, Layout.V4).close()
    assert _layout_facts(ours) == _layout_facts(theirs)
    assert ("table", "events", 1) in _layout_facts(ours)  # STRICT, as upstream creates it


def test_upstream_opens_our_v4_file_losslessly(tmp_path: Path) -> None:
    path = tmp_path / "ours.db"
    with SqliteSessionStore(path, Layout.V4) as store:
        for header, events in ((PRIMARY, PRIMARY_EVENTS), (CHILD, CHILD_EVENTS)):
            log = read_log_text(_log_text(header, events))
            meta = SessionMeta(
                created_at=log.header.created_at,
                cwd=log.header.cwd,
                parent_session=log.header.parent_session,
                seed_length=log.header.seed_length,
            )
            store.create(CreateOptions(log.header.id, seed=log.events, meta=meta)).close()
    assert _upstream_read(path) == {
        "p-1": (PRIMARY, PRIMARY_EVENTS),
        "c-1": (CHILD, CHILD_EVENTS),
    }


def test_a_round_trip_through_our_store_keeps_upstreams_rows_byte_for_byte(
    upstream_db: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.db"
    with SqliteSessionStore(upstream_db) as source, SqliteSessionStore(copy, Layout.V4) as target:
        for header in source.list_sessions():
            log = source.load(header.id)
            meta = SessionMeta(
                created_at=header.created_at,
                cwd=header.cwd,
                parent_session=header.parent_session,
                seed_length=header.seed_length,
            )
            target.create(CreateOptions(header.id, seed=log.events, meta=meta)).close()
    assert _rows(copy) == _rows(upstream_db)
    assert _layout_facts(copy) == _layout_facts(upstream_db)


def test_appending_to_upstreams_file_keeps_its_layout_and_upstream_reads_it(
    upstream_db: Path,
) -> None:
    layout = _layout_facts(upstream_db)
    added = Event("turn/start", 7, 8, {"turn": 3, "trigger": {"kind": "message", "source": _USER}})
    closers = [
        Event("turn/end", 8, 9, {"turn": 3, "reason": {"kind": "completed"}}),
    ]
    with SqliteSessionStore(upstream_db) as store:
        session = store.resume("c-1")
        session.add(added)
        for event in closers:
            session.add(event)
        session.close()
    assert _layout_facts(upstream_db) == layout
    _, events = _upstream_read(upstream_db)["c-1"]
    assert events[7:] == [
        {"type": "turn/start", "seq": 7, "time": 8, "data": added.data},
        {"type": "turn/end", "seq": 8, "time": 9, "data": closers[0].data},
    ]


_CHILD_META = SessionMeta(created_at=5, parent_session="p-1", origin="subagent", delegation_depth=2)


def _tables(path: Path) -> list[str]:
    with _read_only(path) as connection:
        return [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]


def _v4_facts(path: Path) -> list[tuple[Any, ...]]:
    """:func:`_layout_facts` of upstream's two tables only (the side tables left out)."""
    return [fact for fact in _layout_facts(path) if not str(fact[1]).startswith("dsh_")]


def test_the_default_is_v4_and_keeps_what_v4_has_no_column_for_in_side_tables(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ours.db"
    with SqliteSessionStore(path) as store:
        assert store.layout is Layout.V4
        session = store.create(CreateOptions("c", meta=_CHILD_META))
        session.add(Event("x/y", 0, 1, {"a": 1}, extra={"lane": "side", "n": [1]}))
        session.add(Event("x/z", 1, 2, {}))
        session.close()
        imported = read_log_text(
            '{"type":"session","version":0,"id":"h","createdAt":1,"delegationDepth":0,'
            '"futureKey":{"x":1}}\n{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n'
        )
        store.import_log(imported)
    assert _tables(path) == ["dsh_events", "dsh_sessions", "events", "sessions"]
    with SqliteSessionStore(path, Layout.DSH) as store:  # an existing file keeps its layout
        assert store.layout is Layout.V4
        log = store.load("c")
        assert (log.header.origin, log.header.delegation_depth) == ("subagent", 2)
        assert [e.extra for e in log.events] == [{"lane": "side", "n": [1]}, None]
        assert store.load("h").header.to_json() == imported.header.to_json()
    # upstream's v4 opens the file and reads its two tables as always (what v4 has no
    # column for is not there, as upstream's own rowToMeta would drop it)
    read = _upstream_read(path)
    assert read["c"][0] == {"version": 0, "id": "c", "createdAt": 5, "parentSession": "p-1"}
    assert [e["type"] for e in read["c"][1]] == ["x/y", "x/z"]
    assert _v4_facts(path) == _v4_facts(_fresh_upstream(tmp_path))


def _fresh_upstream(tmp_path: Path) -> Path:
    theirs = tmp_path / "theirs.db"
    if not theirs.exists():
        _upstream_open(theirs).close()
    return theirs


def test_a_file_that_never_needs_them_has_upstreams_two_tables_only(tmp_path: Path) -> None:
    path = tmp_path / "ours.db"
    with SqliteSessionStore(path) as store:
        session = store.create(CreateOptions("p", meta=SessionMeta(cwd="/w")))
        session.add(Event("turn/start", 0, 1, {"turn": 1}))
        session.close()
    assert _layout_facts(path) == _layout_facts(_fresh_upstream(tmp_path))


def test_side_tables_are_tied_to_their_rows_by_cascading_foreign_keys(tmp_path: Path) -> None:
    path = tmp_path / "ours.db"
    with SqliteSessionStore(path) as store:
        session = store.create(CreateOptions("c", meta=_CHILD_META))
        session.add(Event("turn/start", 0, 1, {"turn": 1}))
        session.add(Event("x/y", 1, 2, {}, extra={"lane": "side"}))
        session.close()
    facts = _layout_facts(path)
    assert ("table", "dsh_sessions", 1) in facts  # STRICT, like upstream's tables
    assert ("fk", "dsh_sessions", "sessions", "session_id", "id", "CASCADE") in facts
    assert ("fk", "dsh_events", "events", "session_id", "session_id", "CASCADE") in facts
    assert ("fk", "dsh_events", "events", "seq", "seq", "CASCADE") in facts
    # upstream's load deletes a torn tail (DELETE FROM events … seq >= N) and appends its
    # closers at those seqs: the side row goes with the deleted event, nothing stale remains
    connection = _upstream_open(path)
    try:
        connection.execute("DELETE FROM events WHERE session_id = 'c' AND seq >= 1")
        connection.execute(
            "INSERT INTO events (session_id, seq, type, time, data) "
            'VALUES (\'c\', 1, \'turn/end\', 3, \'{"turn":1,"reason":{"kind":"interrupted"}}\')'
        )
    finally:
        connection.close()
    with SqliteSessionStore(path) as store:
        log = store.load("c")
        assert [(e.type, e.extra) for e in log.events] == [("turn/start", None), ("turn/end", None)]
        assert log.header.origin == "subagent"
    # and sessions upstream writes into the file read as v4 holds them
    _upstream_write(path, PRIMARY, PRIMARY_EVENTS)
    with SqliteSessionStore(path) as store:
        assert store.load("p-1").header.to_json() == {"type": "session", **PRIMARY}


def test_resume_deletes_a_torn_tail_with_its_side_rows(tmp_path: Path) -> None:
    path = tmp_path / "ours.db"
    with SqliteSessionStore(path) as store:
        session = store.create(CreateOptions("c"))
        session.add(Event("turn/start", 0, 1, {"turn": 1}))
        session.add(Event("turn/end", 1, 2, {"turn": 1, "reason": {"kind": "completed"}}))
        session.add(Event("x/y", 2, 3, {}, extra={"lane": "side"}))
        session.close()
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("UPDATE events SET data = 'not json' WHERE seq = 2")  # a torn tail
    with SqliteSessionStore(path) as store:
        store.resume("c").close()
    with _read_only(path) as connection:
        assert list(connection.execute("SELECT * FROM dsh_events")) == []


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        (
            ["CREATE TABLE dsh_sessions (session_id TEXT PRIMARY KEY, origin TEXT, "
             "delegation_depth INTEGER, extra TEXT) STRICT"],
            "side table dsh_sessions but not dsh_events",
        ),
        (
            ["CREATE TABLE dsh_sessions (session_id TEXT PRIMARY KEY, origin TEXT) STRICT",
             "CREATE TABLE dsh_events (session_id TEXT, seq INTEGER, extra TEXT) STRICT"],
            "side table dsh_sessions has the columns origin, session_id, not",
        ),
    ],
    ids=["one-alone", "wrong-columns"],
)  # fmt: skip
def test_damaged_side_tables_are_refused_with_the_file_untouched(
    tmp_path: Path, ddl: list[str], message: str
) -> None:
    path = tmp_path / "v4.db"
    _upstream_write(path, PRIMARY, PRIMARY_EVENTS)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        for statement in ddl:
            connection.execute(statement)
    before = path.read_bytes()
    with pytest.raises(StoreCorruptError, match=message):
        SqliteSessionStore(path)
    assert path.read_bytes() == before


def test_the_1004_layout_is_still_read_and_converts_to_v4_with_nothing_lost(
    tmp_path: Path,
) -> None:
    old = tmp_path / "dsh.db"
    with SqliteSessionStore(old, Layout.DSH) as store:
        assert store.layout is Layout.DSH
        session = store.create(CreateOptions("c", meta=_CHILD_META))
        session.add(Event("x/y", 0, 1, {}, extra={"lane": "side"}))
        session.close()
    with SqliteSessionStore(old) as store:  # the default asks for v4; the file keeps 1004
        assert store.layout is Layout.DSH
        log = store.load("c")
        text = store.export_jsonl("c")
    new = tmp_path / "v4.db"
    with SqliteSessionStore(new) as store:
        store.import_log(log)
    with SqliteSessionStore(new) as store:
        assert store.layout is Layout.V4
        assert store.export_jsonl("c") == text
        assert store.load("c") == log


@pytest.fixture
def open_umask() -> Iterator[None]:
    """umask 0: a file's mode is then exactly what the code asked for."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
@pytest.mark.parametrize("layout", list(Layout))
def test_sqlite_store_files_are_created_0600(tmp_path: Path, layout: Layout) -> None:
    path = tmp_path / "s.db"
    with SqliteSessionStore(path, layout) as store:
        session = store.create(CreateOptions("s"))
        session.close()
        for name in ("s.db", "s.db-wal", "s.db-shm"):
            assert _mode(tmp_path / name) == 0o600, name

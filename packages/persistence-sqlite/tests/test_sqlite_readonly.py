"""``ReadOnlySqliteStore``: June's v3, upstream's v4 and dsh-py's 1004 read without a byte
written; every other file refused in one line. Upstream-shaped files are built from June's
``schema.ts`` DDL by hand."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from pathlib import Path

import pytest

from dsh_core import (
    CreateOptions,
    Event,
    LogFormatError,
    SessionMeta,
    SessionNotFoundError,
    StoreVersionError,
)
from dsh_persistence_sqlite import (
    JUNE_SCHEMA_VERSION,
    Layout,
    ReadOnlySqliteStore,
    SqliteSessionStore,
)

_JUNE = [
    """CREATE TABLE sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL,
       created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER) STRICT""",
    """CREATE TABLE events (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
       seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
       PRIMARY KEY (session_id, seq)) STRICT""",
]


def _june(path: Path, *, version: int = JUNE_SCHEMA_VERSION, application_id: int = 0) -> None:
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("PRAGMA journal_mode = WAL")
        for statement in _JUNE:
            connection.execute(statement)
        connection.execute("INSERT INTO sessions VALUES ('j', 0, 7, '/w', 'p', 2)")
        connection.execute(
            "INSERT INTO events VALUES ('j', 0, 'turn/start', 1, '{\"turn\":1}'), "
            '(\'j\', 1, \'turn/end\', 2, \'{"turn":1,"reason":{"kind":"completed"}}\')'
        )
        connection.execute(f"PRAGMA user_version = {version}")
        connection.execute(f"PRAGMA application_id = {application_id}")


def _digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


def test_june_v3_is_read_as_stored_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "june.db"
    _june(path)
    before = _digest(tmp_path)
    with contextlib.closing(ReadOnlySqliteStore(path)) as store:
        assert store.version == 3
        [header] = store.list_sessions()
        assert header.to_json() == {
            "type": "session", "version": 0, "id": "j", "createdAt": 7, "cwd": "/w",
            "parentSession": "p", "seedLength": 2,
        }  # fmt: skip
        log = store.load("j")
        assert [(e.seq, e.type, e.surface_op) for e in log.events] == [
            (0, "turn/start", None),
            (1, "turn/end", None),
        ]
        with pytest.raises(SessionNotFoundError, match="no session x"):
            store.load("x")
    assert _digest(tmp_path) == before


@pytest.mark.parametrize(("layout", "version"), [(Layout.V4, 4), (Layout.DSH, 1004)])
def test_our_layouts_read_back_every_field(tmp_path: Path, layout: Layout, version: int) -> None:
    path = tmp_path / "ours.db"
    meta = SessionMeta(created_at=3, parent_session="p", origin="subagent", delegation_depth=1)
    with SqliteSessionStore(path, layout) as store:
        session = store.create(CreateOptions("c", meta=meta))
        session.add(Event("x/y", 0, 1, {}, extra={"lane": "side"}))
        session.close()
        store.create(CreateOptions("plain")).close()
    before = path.read_bytes()
    with contextlib.closing(ReadOnlySqliteStore(path)) as store:
        assert store.version == version
        log = store.load("c")
        assert (log.header.origin, log.header.delegation_depth) == ("subagent", 1)
        assert log.events[0].extra == {"lane": "side"}
        assert store.load("plain").header.origin is None
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()


@pytest.mark.parametrize(
    ("version", "application_id", "needle"),
    [
        (17, 0x44534850, "upstream HEAD's store"),
        (5, 0, "schema version 5"),
        (3, 0x44534850, "schema version 3 and application_id 0x44534850"),
    ],
)
def test_other_versions_are_refused_in_one_line(
    tmp_path: Path, version: int, application_id: int, needle: str
) -> None:
    path = tmp_path / "s.db"
    _june(path, version=version, application_id=application_id)
    before = _digest(tmp_path)
    with pytest.raises(StoreVersionError, match=needle) as caught:
        ReadOnlySqliteStore(path)
    assert "\n" not in str(caught.value)
    assert str(path) in str(caught.value)
    assert _digest(tmp_path) == before


def test_an_empty_or_unversioned_database_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    with contextlib.closing(sqlite3.connect(empty, isolation_level=None)) as connection:
        connection.execute("CREATE TABLE t (x)")
        connection.execute("DROP TABLE t")
    with pytest.raises(StoreVersionError, match="no tables"):
        ReadOnlySqliteStore(empty)
    unversioned = tmp_path / "unversioned.db"
    _june(unversioned, version=0)
    with pytest.raises(StoreVersionError, match="no schema version"):
        ReadOnlySqliteStore(unversioned)
    with pytest.raises(SessionNotFoundError, match="no such SQLite store file"):
        ReadOnlySqliteStore(tmp_path / "absent.db")


def test_a_damaged_row_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "june.db"
    _june(path)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("UPDATE events SET data = '{' WHERE seq = 1")
    with (
        contextlib.closing(ReadOnlySqliteStore(path)) as store,
        pytest.raises(LogFormatError) as caught,
    ):
        store.load("j")
    assert caught.value.field == "events[seq=1].data"

"""A catalogue of damaged SQLite inputs: each is refused with a typed error naming the file
and the field or row, and the file's bytes are the same afterwards.

Files refused at open must also be left without a ``-wal``/``-shm`` companion or a lock
directory: refusing a file means not writing next to it either.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsh_core import (
    CreateOptions,
    DshError,
    LogFormatError,
    SessionMeta,
    StoreCorruptError,
    StoreVersionError,
)
from dsh_core.testing import synthetic_turn
from dsh_persistence_sqlite import SqliteSessionStore
from dsh_persistence_sqlite._schema import (
    DSH_APPLICATION_ID,
    DSH_SCHEMA_VERSION,
    Layout,
    schema_sql,
    side_table_sql,
)

SESSION = "victim"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def _good_store(path: Path, turns: int = 3) -> None:
    """A healthy store holding SESSION (``turns`` whole turns) and a bystander session."""
    with SqliteSessionStore(path) as store:
        session = store.create(
            CreateOptions(session_id=SESSION, meta=SessionMeta(created_at=7, seed_length=2))
        )
        for turn in range(1, turns + 1):
            for event in synthetic_turn(session.next_seq, turn):
                session.add(event)
            session.flush()
        session.close()
        store.create(CreateOptions(session_id="bystander")).close()


def _loosen(path: Path) -> None:
    """Drop STRICT from the stored schema, as a tool rewriting ``sqlite_master`` would: only
    then can a value of the wrong type reach a column, and the reader must still refuse it."""
    connection = _raw(path)
    try:
        connection.execute("PRAGMA writable_schema = ON")
        connection.execute("UPDATE sqlite_master SET sql = replace(sql, ') STRICT', ')')")
    finally:
        connection.close()


def _edit(path: Path, *statements: str) -> None:
    """Damage a healthy store with raw SQL, as a hand edit or another program would."""
    _good_store(path)
    _loosen(path)
    connection = _raw(path)
    try:
        connection.execute("PRAGMA foreign_keys = OFF")
        for statement in statements:
            connection.execute(statement)
    finally:
        connection.close()


def _foreign_app(path: Path) -> None:
    connection = _raw(path)
    connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    connection.execute("INSERT INTO users (name) VALUES ('ada')")
    connection.close()


def _versioned(version: int, *, ours: bool = True, wal: bool = False) -> Callable[[Path], None]:
    def build(path: Path) -> None:
        connection = _raw(path)
        if wal:
            connection.execute("PRAGMA journal_mode = WAL")
        if ours:
            for statement in schema_sql(Layout.DSH):
                connection.execute(statement)
            if version == DSH_SCHEMA_VERSION:
                connection.execute(f"PRAGMA application_id = {DSH_APPLICATION_ID}")
        else:
            connection.execute("CREATE TABLE t (x)")
        connection.execute(f"PRAGMA user_version = {version}")
        connection.close()

    return build


def _text_file(path: Path) -> None:
    path.write_text('{"type":"session","version":0,"id":"x","createdAt":1}\n')


def _short_header(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 20)


def _truncated(path: Path) -> None:
    _good_store(path, turns=40)
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size // 2)


def _missing_table(path: Path) -> None:
    connection = _raw(path)
    connection.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
    connection.execute("PRAGMA user_version = 4")
    connection.close()


def _missing_column(path: Path) -> None:
    connection = _raw(path)
    sessions, events = schema_sql(Layout.DSH)
    connection.execute(sessions)
    connection.execute(events.replace("    extra TEXT,\n    PRIMARY KEY", "    PRIMARY KEY"))
    connection.execute(f"PRAGMA user_version = {DSH_SCHEMA_VERSION}")
    connection.execute(f"PRAGMA application_id = {DSH_APPLICATION_ID}")
    connection.close()


@dataclass(frozen=True)
class Case:
    build: Callable[[Path], None]
    error: type[DshError]
    needles: tuple[str, ...]
    field: str | None = None
    at_open: bool = False


CASES: dict[str, Case] = {
    # --- refused when the store is opened ---
    "other-application": Case(
        _foreign_app, StoreVersionError, ("no schema version", "users", "version 4"), at_open=True
    ),
    "text-file-named-sqlite3": Case(
        _text_file, StoreCorruptError, ("not an SQLite database",), at_open=True
    ),
    "header-cut-short": Case(
        _short_header, StoreCorruptError, ("not an SQLite database",), at_open=True
    ),
    "user-version-3": Case(
        _versioned(3),
        StoreVersionError,
        ("schema version 3", "schema version 4", "does not migrate"),
        at_open=True,
    ),
    "user-version-5": Case(
        _versioned(5), StoreVersionError, ("schema version 5", "schema version 4"), at_open=True
    ),
    "user-version-99": Case(
        _versioned(99, ours=False),
        StoreVersionError,
        ("schema version 99", "schema version 4"),
        at_open=True,
    ),
    "user-version-5-in-wal-mode": Case(
        _versioned(5, wal=True), StoreVersionError, ("schema version 5",), at_open=True
    ),
    "truncated-file": Case(_truncated, StoreCorruptError, ("truncated", "pages"), at_open=True),
    "version-4-without-events-table": Case(
        _missing_table, StoreCorruptError, ("no events table",), at_open=True
    ),
    "version-4-missing-a-column": Case(
        _missing_column, StoreCorruptError, ("events", "extra"), at_open=True
    ),
    # --- damaged rows: refused when the session is read ---
    "data-invalid-json": Case(
        lambda p: _edit(
            p,
            f"UPDATE events SET data = '{{\"turn\": 1,' WHERE session_id = '{SESSION}' AND seq = 5",
        ),
        LogFormatError,
        ("invalid JSON",),
        field="events[seq=5].data",
    ),
    "data-not-an-object": Case(
        lambda p: _edit(
            p, f"UPDATE events SET data = '[1, 2]' WHERE session_id = '{SESSION}' AND seq = 0"
        ),
        LogFormatError,
        ("JSON object",),
        field="events[seq=0].data",
    ),
    "seq-gap": Case(
        lambda p: _edit(p, f"DELETE FROM events WHERE session_id = '{SESSION}' AND seq = 9"),
        LogFormatError,
        ("seq gap", "expected seq 9"),
        field="events[seq=10].seq",
    ),
    "time-not-an-integer": Case(
        lambda p: _edit(
            p, f"UPDATE events SET time = 'noon' WHERE session_id = '{SESSION}' AND seq = 3"
        ),
        LogFormatError,
        ("time must be an integer", "noon"),
        field="events[seq=3].time",
    ),
    # each row alone is invalid, but joined with commas they parse as the right number of
    # objects: the one-loads-per-chunk fast path must not be fooled into accepting them
    "rows-that-only-parse-when-joined": Case(
        lambda p: _edit(
            p,
            f"UPDATE events SET data = '{{\"a\":\"' WHERE session_id = '{SESSION}' AND seq = 3",
            f"UPDATE events SET data = '\"}}' WHERE session_id = '{SESSION}' AND seq = 4",
            f"UPDATE events SET data = '{{}},{{}}' WHERE session_id = '{SESSION}' AND seq = 5",
        ),
        LogFormatError,
        ("invalid JSON",),
        field="events[seq=3].data",
    ),
    "empty-event-type": Case(
        lambda p: _edit(
            p, f"UPDATE events SET type = '' WHERE session_id = '{SESSION}' AND seq = 2"
        ),
        LogFormatError,
        ("non-empty string",),
        field="events[seq=2].type",
    ),
    "source-event-seqs-invalid-json": Case(
        lambda p: _edit(
            p,
            f"UPDATE events SET source_event_seqs = '[1,' "
            f"WHERE session_id = '{SESSION}' AND seq = 4",
        ),
        LogFormatError,
        ("invalid JSON",),
        field="events[seq=4].source_event_seqs",
    ),
    "source-event-seqs-not-integers": Case(
        lambda p: _edit(
            p,
            f"UPDATE events SET source_event_seqs = '[1, \"two\"]' "
            f"WHERE session_id = '{SESSION}' AND seq = 4",
        ),
        LogFormatError,
        ("list of integers",),
        field="events[seq=4].source_event_seqs",
    ),
    # what v4 has no column for lives in the side tables of a v4 file (the default)
    "envelope-extra-not-an-object": Case(
        lambda p: _edit(
            p, *side_table_sql(), f"INSERT INTO dsh_events VALUES ('{SESSION}', 1, '7')"
        ),
        LogFormatError,
        ("JSON object",),
        field="events[seq=1].extra",
    ),
    "negative-seed-length": Case(
        lambda p: _edit(p, f"UPDATE sessions SET seed_length = -1 WHERE id = '{SESSION}'"),
        LogFormatError,
        ("non-negative integer", "-1"),
        field="sessions.seed_length",
    ),
    "non-integer-seed-length": Case(
        lambda p: _edit(p, f"UPDATE sessions SET seed_length = 'three' WHERE id = '{SESSION}'"),
        LogFormatError,
        ("non-negative integer", "three"),
        field="sessions.seed_length",
    ),
    "fractional-seed-length": Case(
        lambda p: _edit(p, f"UPDATE sessions SET seed_length = 2.5 WHERE id = '{SESSION}'"),
        LogFormatError,
        ("2.5",),
        field="sessions.seed_length",
    ),
    "header-version-1": Case(
        lambda p: _edit(p, f"UPDATE sessions SET version = 1 WHERE id = '{SESSION}'"),
        LogFormatError,
        ("unsupported log version 1",),
        field="sessions.version",
    ),
    "negative-created-at": Case(
        lambda p: _edit(p, f"UPDATE sessions SET created_at = -5 WHERE id = '{SESSION}'"),
        LogFormatError,
        ("created_at",),
        field="sessions.created_at",
    ),
    "cwd-is-a-blob": Case(
        lambda p: _edit(p, f"UPDATE sessions SET cwd = x'00ff' WHERE id = '{SESSION}'"),
        LogFormatError,
        ("text or NULL",),
        field="sessions.cwd",
    ),
    "header-extra-invalid-json": Case(
        lambda p: _edit(
            p, *side_table_sql(), f"INSERT INTO dsh_sessions VALUES ('{SESSION}', NULL, NULL, '{{')"
        ),
        LogFormatError,
        ("invalid JSON",),
        field="sessions.extra",
    ),
    "missing-session-row": Case(
        lambda p: _edit(p, f"DELETE FROM sessions WHERE id = '{SESSION}'"),
        LogFormatError,
        ("sessions row is missing", SESSION),
        field="sessions.id",
    ),
}

_HEADER_FIELDS = (
    "sessions.seed_length",
    "sessions.version",
    "sessions.created_at",
    "sessions.cwd",
    "sessions.extra",
)


def _companions(path: Path) -> list[Path]:
    return [
        p for p in (Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}.locks")) if p.exists()
    ]


@pytest.mark.parametrize("name", sorted(CASES))
def test_damaged_input_is_refused_and_left_untouched(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    path = tmp_path / "store.sqlite3"
    case.build(path)
    assert not Path(f"{path}-wal").exists()  # every builder leaves a checkpointed file
    before = _digest(path)
    companions = _companions(path)

    errors: list[DshError] = []
    if case.at_open:
        with pytest.raises(case.error) as caught:
            SqliteSessionStore(path)
        errors.append(caught.value)
        assert _companions(path) == companions, "a refused file got a -wal/-shm/lock companion"
    else:
        with SqliteSessionStore(path) as store:
            with pytest.raises(case.error) as caught:
                store.load(SESSION)
            errors.append(caught.value)
            with pytest.raises(case.error) as caught:
                store.resume(SESSION)  # nothing is repaired or rewritten on the way
            errors.append(caught.value)
            with pytest.raises(case.error) as caught:
                store.export_jsonl(SESSION)
            errors.append(caught.value)
            if case.field in _HEADER_FIELDS:
                with pytest.raises(case.error):
                    store.list_sessions()
            # the damage is confined to its session
            assert store.load("bystander").header.id == "bystander"

    for error in errors:
        message = str(error)
        assert str(path) in message
        for needle in case.needles:
            assert needle in message, f"{needle!r} not in {message!r}"
        if isinstance(error, LogFormatError):
            assert error.source == str(path)
            assert error.line is None
            assert error.field == case.field
    assert _digest(path) == before, "the refused file was modified"


def test_catalogue_has_at_least_ten_open_time_and_ten_row_cases() -> None:
    at_open = [c for c in CASES.values() if c.at_open]
    assert len(at_open) >= 10
    assert len(CASES) - len(at_open) >= 10


def test_damaged_session_does_not_block_a_new_store_on_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    CASES["data-invalid-json"].build(path)
    with SqliteSessionStore(path) as store:
        session = store.create(CreateOptions(session_id="fresh"))
        session.close()
        assert {h.id for h in store.list_sessions()} == {SESSION, "bystander", "fresh"}

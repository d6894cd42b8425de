"""The version-refusal matrix: every SQLite store this code does not read is refused in one
line naming the file and the version, and its bytes (and its directory) stay as they were.

The files are upstream-shaped, built by hand from upstream's documented layouts: June's schema
version 3 (``upstream-src/june/.../session-persistence-sqlite/src/schema.ts``), the v4 tables
stamped with neighbouring versions, HEAD's v17 markers (``application_id`` 0x44534850 and a
``persistence_state`` table, as measured in the issue "One format with upstream"), and a
pre-versioning file (upstream's v4 tables, ``user_version`` 0, rows in them).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core import StoreVersionError
from dsh_persistence_sqlite import SqliteSessionStore

_JUNE_V3 = [
    """CREATE TABLE sessions (
      id TEXT PRIMARY KEY, version INTEGER NOT NULL, created_at INTEGER NOT NULL,
      cwd TEXT, parent_session TEXT, seed_length INTEGER) STRICT""",
    """CREATE TABLE events (
      session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
      seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
      PRIMARY KEY (session_id, seq)) STRICT""",
]
_V4 = [
    _JUNE_V3[0],
    """CREATE TABLE events (
      session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
      seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
      source_event_seqs TEXT, surface_op TEXT, PRIMARY KEY (session_id, seq)) STRICT""",
]


def _database(
    ddl: list[str], version: int, *, application_id: int = 0, wal: bool = True
) -> Callable[[Path], None]:
    def build(path: Path) -> None:
        connection = sqlite3.connect(path, isolation_level=None)
        try:
            if wal:
                connection.execute("PRAGMA journal_mode = WAL")
            for statement in ddl:
                connection.execute(statement)
            connection.execute(
                "INSERT INTO sessions (id, version, created_at) VALUES ('s-1', 0, 1782000000000)"
            )
            connection.execute(
                "INSERT INTO events (session_id, seq, type, time, data) "
                "VALUES ('s-1', 0, 'turn/start', 1, '{\"turn\":1}')"
            )
            connection.execute(f"PRAGMA user_version = {version}")
            if application_id:
                connection.execute(f"PRAGMA application_id = {application_id}")
        finally:
            connection.close()

    return build


_HEAD_V17 = [
    *_V4,
    "CREATE TABLE persistence_state (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT",
]
_LEGACY_DSH = [
    _V4[0].replace("seed_length INTEGER)", "seed_length INTEGER, origin TEXT, "
                   "delegation_depth INTEGER, extra TEXT)"),
    _V4[1].replace("surface_op TEXT,", "surface_op TEXT, extra TEXT,"),
]  # fmt: skip

MATRIX: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "v2": (_database(_JUNE_V3, 2), ("schema version 2",)),
    "v3-june": (_database(_JUNE_V3, 3), ("schema version 3",)),
    "v3-june-rollback-journal": (_database(_JUNE_V3, 3, wal=False), ("schema version 3",)),
    "v5": (_database(_V4, 5), ("schema version 5",)),
    "v17-head": (
        _database(_HEAD_V17, 17, application_id=0x44534850),
        (
            "schema version 17",
            "application_id 0x44534850",
            # what was found ...
            "found tables events(session_id, seq, type, time, data, source_event_seqs, "
            "surface_op), persistence_state(key, value), sessions(id, version, created_at, "
            "cwd, parent_session, seed_length); file mode 0",
            # ... why it is not read, and what to do
            "No upstream source or recording available to this build describes the v17 layout",
            "have upstream HEAD write them with its JSONL persistence and run "
            "`dsh-sessions convert ROOT DST`",
            "add upstream HEAD's session-persistence-sqlite sources (its schema.ts)",
        ),
    ),
    "unversioned": (_database(_V4, 0), ("no schema version", "user_version 0")),
    "v4-with-dsh-py-columns": (
        _database(_LEGACY_DSH, 4),
        ("schema version 4", "dsh-py's columns", "dsh-sessions convert"),
    ),
    "v1004-without-dsh-application-id": (_database(_LEGACY_DSH, 1004), ("schema version 1004",)),
}


def _snapshot(directory: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.iterdir())
    }


@pytest.mark.parametrize("case", list(MATRIX))
def test_an_unknown_version_is_refused_in_one_line_with_the_file_untouched(
    tmp_path: Path, case: str
) -> None:
    build, needles = MATRIX[case]
    path = tmp_path / "sessions.db"
    build(path)
    before = _snapshot(tmp_path)
    assert list(before) == ["sessions.db"]  # a clean close left no -wal / -shm behind
    with pytest.raises(StoreVersionError) as caught:
        SqliteSessionStore(path)
    message = str(caught.value)
    assert "\n" not in message
    assert str(path) in message
    for needle in needles:
        assert needle in message
    assert "nothing was written" in message
    assert _snapshot(tmp_path) == before


def test_a_v17_file_names_its_tables_in_one_bounded_line(tmp_path: Path) -> None:
    """The refusal shows what the file holds, but a hostile file chooses its names: control
    characters are masked, long names cut, and only the first tables and columns shown."""
    path = tmp_path / "head.db"
    columns = ", ".join(f"c{n} TEXT" for n in range(20))
    tables = [f'CREATE TABLE "t{n:02d}" ({columns})' for n in range(12)]
    tables.append('CREATE TABLE "evil\nname\u0007' + "x" * 200 + '" (a TEXT)')
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in tables:
            connection.execute(statement)
        connection.execute("PRAGMA user_version = 17")
        connection.execute(f"PRAGMA application_id = {0x44534850}")
    finally:
        connection.close()
    before = _snapshot(tmp_path)
    with pytest.raises(StoreVersionError) as caught:
        SqliteSessionStore(path)
    message = str(caught.value)
    assert "\n" not in message
    assert "\u0007" not in message
    assert "found tables evil?name?xxx" in message
    assert "t00(c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, …)" in message
    assert "t06(" in message
    assert "t07(" not in message
    assert " and 5 more; file mode " in message
    assert len(message) < 2000
    assert _snapshot(tmp_path) == before

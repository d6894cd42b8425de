"""Recognising a store file before touching it, and laying down schema version 4.

Everything in :func:`inspect_file` is read-only by construction: the SQLite header is read
from the raw bytes, and the schema through an ``immutable=1`` read-only connection, which
never creates a ``-wal`` or ``-shm`` file (a plain ``mode=ro`` connection does, for a database
in WAL mode). A file this code does not own is therefore refused with its bytes untouched.
"""

from __future__ import annotations

import sqlite3
import struct
from dataclasses import dataclass
from pathlib import Path

from dsh_core import StoreCorruptError, StoreVersionError

__all__ = ["SCHEMA_SQL", "SCHEMA_VERSION", "FileState", "inspect_file", "stamp_if_fresh"]

SCHEMA_VERSION = 4

_MAGIC = b"SQLite format 3\x00"

# ``extra`` columns hold, as a JSON object, the header / envelope keys this version does not
# know, so that logs written by newer code survive a round trip through this store.
SCHEMA_SQL = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY NOT NULL,
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    cwd TEXT,
    parent_session TEXT,
    seed_length INTEGER,
    origin TEXT,
    delegation_depth INTEGER,
    extra TEXT
);
CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    time INTEGER NOT NULL,
    data TEXT NOT NULL,
    source_event_seqs TEXT,
    surface_op TEXT,
    extra TEXT,
    PRIMARY KEY (session_id, seq)
);
"""

_EXPECTED_COLUMNS = {
    "sessions": {
        "id",
        "version",
        "created_at",
        "cwd",
        "parent_session",
        "seed_length",
        "origin",
        "delegation_depth",
        "extra",
    },
    "events": {
        "session_id",
        "seq",
        "type",
        "time",
        "data",
        "source_event_seqs",
        "surface_op",
        "extra",
    },
}


@dataclass(frozen=True, slots=True)
class FileState:
    """What :func:`inspect_file` found: ``fresh`` means empty or absent (to be stamped)."""

    fresh: bool


def _read_header(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(100)


def _check_raw_header(path: Path, header: bytes, size: int, wal_in_use: bool) -> int:
    """Validate the 100-byte SQLite header; return the ``user_version`` it records."""
    if len(header) < 100 or not header.startswith(_MAGIC):
        raise StoreCorruptError(
            f"{path} is not an SQLite database (no 'SQLite format 3' header); "
            f"refusing to use it as a dsh session store; nothing was written"
        )
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    change_counter, page_count = struct.unpack(">II", header[24:32])
    valid_for = struct.unpack(">I", header[92:96])[0]
    # The in-header size is only authoritative when ``version-valid-for`` matches the change
    # counter (https://www.sqlite.org/fileformat2.html#in_header_database_size), and a
    # checkpoint interrupted mid-way may legitimately leave the file short while the WAL
    # still holds the pages.
    if (
        not wal_in_use
        and page_count
        and change_counter == valid_for
        and size < page_count * page_size
    ):
        raise StoreCorruptError(
            f"{path} is truncated: its header records {page_count} pages of {page_size} bytes "
            f"({page_count * page_size} bytes) but the file has {size} bytes; "
            f"nothing was written"
        )
    return struct.unpack(">I", header[60:64])[0]


def _readonly_connection(path: Path, wal_in_use: bool) -> sqlite3.Connection:
    uri = path.resolve().as_uri() + ("?mode=ro" if wal_in_use else "?mode=ro&immutable=1")
    return sqlite3.connect(uri, uri=True)


def _tables(connection: sqlite3.Connection) -> dict[str, set[str]]:
    names = [
        row[0]
        for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    return {
        name: {
            str(row[1]) for row in connection.execute("SELECT * FROM pragma_table_info(?)", (name,))
        }
        for name in names
    }


def inspect_file(path: Path) -> FileState:
    """Decide, without writing a byte, whether ``path`` is a fresh file or a version-4 store.

    Raises:
        StoreVersionError: the file records another schema version, or belongs to another
            application (version 0 with foreign tables).
        StoreCorruptError: not an SQLite file, truncated, or a version-4 file missing tables.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return FileState(fresh=True)
    wal = Path(f"{path}-wal")
    wal_in_use = wal.exists() and wal.stat().st_size > 0
    if size == 0 and not wal_in_use:
        return FileState(fresh=True)
    version = _check_raw_header(path, _read_header(path), size, wal_in_use)
    if version not in (0, SCHEMA_VERSION) and not wal_in_use:
        raise _version_error(path, version)
    try:
        connection = _readonly_connection(path, wal_in_use)
        try:
            version = int(connection.execute("PRAGMA user_version").fetchone()[0])
            if version not in (0, SCHEMA_VERSION):
                raise _version_error(path, version)
            tables = _tables(connection)
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        raise StoreCorruptError(
            f"{path} is not a readable SQLite database ({exc}); nothing was written"
        ) from None
    if version == 0:
        if tables:
            raise StoreVersionError(
                f"{path} is an SQLite database of another application (schema version 0, "
                f"tables: {', '.join(sorted(tables))}), not a dsh session store (schema "
                f"version {SCHEMA_VERSION}); refusing to touch it; nothing was written"
            )
        return FileState(fresh=True)
    absent = [table for table in _EXPECTED_COLUMNS if table not in tables]
    if absent:
        raise StoreCorruptError(
            f"{path} records schema version {SCHEMA_VERSION} but has no "
            f"{' and no '.join(absent)} table; nothing was written"
        )
    for table, expected in _EXPECTED_COLUMNS.items():
        missing = expected - tables[table]
        if missing:
            raise StoreCorruptError(
                f"{path}: table {table} lacks the columns {', '.join(sorted(missing))} "
                f"of schema version {SCHEMA_VERSION}; nothing was written"
            )
    return FileState(fresh=False)


def _version_error(path: Path, found: int) -> StoreVersionError:
    return StoreVersionError(
        f"{path} has schema version {found}; this code reads schema version "
        f"{SCHEMA_VERSION} only and does not migrate; nothing was written"
    )


def stamp_if_fresh(connection: sqlite3.Connection) -> None:
    """Inside ``BEGIN IMMEDIATE``: create the schema and stamp version 4 if nobody has yet.

    Two processes may both see a fresh file; the write lock serialises them and the second
    finds the stamp already there.
    """
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    if version == SCHEMA_VERSION:
        return
    for statement in SCHEMA_SQL.split(";"):
        if statement.strip():
            connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

"""Recognising a store file before touching it, and laying down a fresh one.

Two layouts, told apart by ``PRAGMA user_version`` (and ``application_id``):

- **4** (the default for a fresh file): upstream's schema version 4 *exactly* (the
  seed-boundary RFC; upstream's ``session-persistence-sqlite/src/schema.ts`` at the v4
  commit): the two ``STRICT`` tables ``sessions`` and ``events`` column for column,
  ``application_id`` 0. What v4 has no column for (a header's ``origin``,
  ``delegationDepth`` and unknown keys; an event's unknown envelope keys) is kept in two side
  tables, ``dsh_sessions`` and ``dsh_events``, created in the same transaction the first time
  a session needs them and tied to their rows by foreign keys with ``ON DELETE CASCADE``.
  Upstream's v4 opens such a file, reads and writes its two tables as always and never looks
  at the side tables (its ``openDatabase`` checks only ``user_version``); its own deletes
  (a torn tail on load) cascade into them, so no side row outlives its event.
- **1004** with ``application_id`` 0x44534859 (``"DSHY"``): dsh-py's former default,
  upstream's v4 tables plus the columns for what v4 has no place for. Still opened and
  written; created only when asked for (``Layout.DSH``); ``dsh-sessions convert`` turns it
  into a v4 file with nothing lost (see the README, "Layouts").

Everything in :func:`inspect_file` is read-only by construction: the SQLite header is read
from the raw bytes, and the schema through an ``immutable=1`` read-only connection, which
never creates a ``-wal`` or ``-shm`` file (a plain ``mode=ro`` connection does, for a database
in WAL mode). A file this code does not own is therefore refused with its bytes untouched.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from dsh_core import StoreCorruptError, StoreVersionError

__all__ = [
    "DSH_APPLICATION_ID",
    "DSH_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "HEAD_APPLICATION_ID",
    "HEAD_SCHEMA_VERSION",
    "FileState",
    "Layout",
    "create_private",
    "inspect_file",
    "readonly_connection",
    "has_side_tables",
    "schema_sql",
    "side_table_sql",
    "stamp_if_fresh",
    "version_error",
]

SCHEMA_VERSION = 4
"""Upstream's schema version 4, the seed-boundary RFC's layout."""

DSH_SCHEMA_VERSION = 1004
"""dsh-py's layout: upstream's v4 plus the columns v4 has no place for."""

DSH_APPLICATION_ID = 0x44534859
"""``"DSHY"``: stamped on dsh-py layout files only (upstream's v4 leaves it 0)."""

_MAGIC = b"SQLite format 3\x00"


class Layout(Enum):
    """Which of the two table layouts a store file has (or is to be created with)."""

    V4 = "v4"
    """Upstream's schema version 4, exactly; what it has no column for in side tables."""
    DSH = "dsh"
    """dsh-py's former layout (version 1004): the same fields in extra columns."""

    @property
    def version(self) -> int:
        """The ``user_version`` this layout is stamped with."""
        return SCHEMA_VERSION if self is Layout.V4 else DSH_SCHEMA_VERSION

    @property
    def application_id(self) -> int:
        """The ``application_id`` this layout is stamped with."""
        return 0 if self is Layout.V4 else DSH_APPLICATION_ID


# Upstream's v4 DDL, column for column (``schema.ts``: ``openDatabase``). STRICT matters: it is
# part of the table definition upstream creates, and it makes SQLite refuse a value of the
# wrong type instead of storing it.
_V4_SESSIONS = """
    id             TEXT PRIMARY KEY,
    version        INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    cwd            TEXT,
    parent_session TEXT,
    seed_length    INTEGER"""
_V4_EVENTS = """
    session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq               INTEGER NOT NULL,
    type              TEXT NOT NULL,
    time              INTEGER NOT NULL,
    data              TEXT NOT NULL,
    source_event_seqs TEXT,
    surface_op        TEXT"""
# ``extra`` holds, as a JSON object, the header / envelope keys no column names, so that logs
# written by newer code survive a round trip through a dsh-layout store.
_DSH_SESSIONS = ",\n    origin TEXT,\n    delegation_depth INTEGER,\n    extra TEXT"
_DSH_EVENTS = ",\n    extra TEXT"
_KEY = ",\n    PRIMARY KEY (session_id, seq)"

_V4_COLUMNS = {
    "sessions": ("id", "version", "created_at", "cwd", "parent_session", "seed_length"),
    "events": (
        "session_id",
        "seq",
        "type",
        "time",
        "data",
        "source_event_seqs",
        "surface_op",
    ),
}
_DSH_EXTRA_COLUMNS = {"sessions": ("origin", "delegation_depth", "extra"), "events": ("extra",)}


# The side tables of a version-4 file: what v4 has no column for, keyed by the row it belongs
# to. Foreign keys with ON DELETE CASCADE (upstream and this store both run foreign_keys=ON)
# remove a side row with its session or event, whoever deletes it.
_SIDE_SESSIONS = """CREATE TABLE IF NOT EXISTS dsh_sessions (
    session_id       TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    origin           TEXT,
    delegation_depth INTEGER,
    extra            TEXT
) STRICT"""
_SIDE_EVENTS = """CREATE TABLE IF NOT EXISTS dsh_events (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    extra      TEXT NOT NULL,
    PRIMARY KEY (session_id, seq),
    FOREIGN KEY (session_id, seq) REFERENCES events(session_id, seq) ON DELETE CASCADE
) STRICT"""
_SIDE_COLUMNS = {
    "dsh_sessions": {"session_id", "origin", "delegation_depth", "extra"},
    "dsh_events": {"session_id", "seq", "extra"},
}


def side_table_sql() -> list[str]:
    """The ``CREATE TABLE IF NOT EXISTS`` statements of a version-4 file's side tables."""
    return [_SIDE_SESSIONS, _SIDE_EVENTS]


def has_side_tables(connection: sqlite3.Connection) -> bool:
    """Whether the database holds both side tables (:func:`inspect_file` refuses one alone)."""
    row = connection.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
        "AND name IN ('dsh_sessions', 'dsh_events')"
    ).fetchone()
    return int(row[0]) == len(_SIDE_COLUMNS)


def schema_sql(layout: Layout) -> list[str]:
    """The ``CREATE TABLE`` statements of ``layout``."""
    extra_sessions = _DSH_SESSIONS if layout is Layout.DSH else ""
    extra_events = _DSH_EVENTS if layout is Layout.DSH else ""
    return [
        f"CREATE TABLE sessions ({_V4_SESSIONS}{extra_sessions}\n) STRICT",
        f"CREATE TABLE events ({_V4_EVENTS}{extra_events}{_KEY}\n) STRICT",
    ]


def _expected_columns(layout: Layout) -> dict[str, set[str]]:
    return {
        table: set(columns) | (set(_DSH_EXTRA_COLUMNS[table]) if layout is Layout.DSH else set())
        for table, columns in _V4_COLUMNS.items()
    }


@dataclass(frozen=True, slots=True)
class FileState:
    """What :func:`inspect_file` found: ``fresh`` means empty or absent (to be stamped);
    otherwise ``layout`` is the layout the file has."""

    fresh: bool
    layout: Layout | None = None


def _read_header(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(100)


def _check_raw_header(path: Path, header: bytes, size: int, wal_in_use: bool) -> tuple[int, int]:
    """Validate the 100-byte SQLite header; return its ``(user_version, application_id)``."""
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
    return struct.unpack(">I", header[60:64])[0], struct.unpack(">I", header[68:72])[0]


def readonly_connection(path: Path) -> sqlite3.Connection:
    """A connection that cannot write ``path`` nor create a ``-wal`` / ``-shm`` beside it
    (``immutable=1``), unless a live WAL holds committed pages, which must then be read."""
    wal = Path(f"{path}-wal")
    wal_in_use = wal.exists() and wal.stat().st_size > 0
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


def _known(version: int, application_id: int) -> Layout | None:
    if version == SCHEMA_VERSION and application_id == 0:
        return Layout.V4
    if version == DSH_SCHEMA_VERSION and application_id == DSH_APPLICATION_ID:
        return Layout.DSH
    return None


def inspect_file(path: Path) -> FileState:
    """Decide, without writing a byte, whether ``path`` is fresh or which layout it has.

    Raises:
        StoreVersionError: the file records another schema version (including 0 with tables:
            an unversioned database), or belongs to another application.
        StoreCorruptError: not an SQLite file, truncated, or a store missing tables or with
            columns other than its version's.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return FileState(fresh=True)
    wal = Path(f"{path}-wal")
    wal_in_use = wal.exists() and wal.stat().st_size > 0
    if size == 0 and not wal_in_use:
        return FileState(fresh=True)
    version, application_id = _check_raw_header(path, _read_header(path), size, wal_in_use)
    if version != 0 and _known(version, application_id) is None and not wal_in_use:
        raise version_error(path, version, application_id)
    try:
        connection = readonly_connection(path)
        try:
            version = int(connection.execute("PRAGMA user_version").fetchone()[0])
            application_id = int(connection.execute("PRAGMA application_id").fetchone()[0])
            if version != 0 and _known(version, application_id) is None:
                raise version_error(path, version, application_id)
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
                f"{path} has no schema version (user_version 0) but holds tables "
                f"({', '.join(sorted(tables))}): an unversioned or foreign database, not a dsh "
                f"session store (schema version {SCHEMA_VERSION} or {DSH_SCHEMA_VERSION}); "
                f"it is not migrated; nothing was written"
            )
        return FileState(fresh=True)
    layout = _known(version, application_id)
    assert layout is not None  # refused above otherwise
    _check_columns(path, layout, tables)
    return FileState(fresh=False, layout=layout)


def _check_columns(path: Path, layout: Layout, tables: dict[str, set[str]]) -> None:
    absent = [table for table in _V4_COLUMNS if table not in tables]
    if absent:
        raise StoreCorruptError(
            f"{path} records schema version {layout.version} but has no "
            f"{' and no '.join(absent)} table; nothing was written"
        )
    for table, expected in _expected_columns(layout).items():
        missing = expected - tables[table]
        if missing:
            raise StoreCorruptError(
                f"{path}: table {table} lacks the columns {', '.join(sorted(missing))} "
                f"of schema version {layout.version}; nothing was written"
            )
        surplus = tables[table] - expected
        if surplus and layout is Layout.V4 and surplus <= set(_DSH_EXTRA_COLUMNS[table]):
            raise StoreVersionError(
                f"{path} records schema version 4 but its {table} table has dsh-py's columns "
                f"{', '.join(sorted(surplus))} (written by dsh-py before it adopted upstream's "
                f"v4 exactly); convert it with 'dsh-sessions convert {path} NEW.sqlite3'; "
                f"nothing was written"
            )
        if surplus:
            raise StoreCorruptError(
                f"{path}: table {table} has columns {', '.join(sorted(surplus))} that schema "
                f"version {layout.version} does not define; nothing was written"
            )
    present = sorted(name for name in _SIDE_COLUMNS if name in tables)
    if layout is Layout.V4 and present:
        absent_side = sorted(set(_SIDE_COLUMNS) - set(present))
        if absent_side:
            raise StoreCorruptError(
                f"{path} has the side table {present[0]} but not {absent_side[0]} (they are "
                f"created together); nothing was written"
            )
        for name, expected_side in _SIDE_COLUMNS.items():
            if tables[name] != expected_side:
                raise StoreCorruptError(
                    f"{path}: side table {name} has the columns "
                    f"{', '.join(sorted(tables[name]))}, not "
                    f"{', '.join(sorted(expected_side))}; nothing was written"
                )


HEAD_SCHEMA_VERSION = 17
HEAD_APPLICATION_ID = 0x44534850
"""Upstream HEAD's SQLite store: ``user_version`` 17, ``application_id`` "DSHP" (as measured in
issue 23; no upstream source or recording available to this build describes its layout)."""

_SHOWN_TABLES, _SHOWN_COLUMNS, _SHOWN_NAME = 8, 12, 40


def _shown(name: object) -> str:
    """A name from the file, safe for a one-line message (a hostile file chooses its names)."""
    text = "".join(ch if ch.isprintable() and not ch.isspace() else "?" for ch in str(name))
    return text if len(text) <= _SHOWN_NAME else text[: _SHOWN_NAME - 1] + "…"


def found_tables(path: Path) -> str:
    """The tables ``path`` holds with their columns in order, read without writing a byte,
    bounded (a few tables and columns) for a one-line message."""
    try:
        with contextlib.closing(readonly_connection(path)) as connection:
            names = [
                str(row[0])
                for row in connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            ]
            shown: list[str] = []
            for name in names[:_SHOWN_TABLES]:
                columns = [
                    _shown(row[1])
                    for row in connection.execute(
                        "SELECT * FROM pragma_table_info(?) ORDER BY cid", (name,)
                    )
                ]
                more = ", …" if len(columns) > _SHOWN_COLUMNS else ""
                shown.append(f"{_shown(name)}({', '.join(columns[:_SHOWN_COLUMNS])}{more})")
    except sqlite3.DatabaseError as exc:
        return f"tables unreadable ({' '.join(str(exc).split())})"
    if not names:
        return "no tables"
    more = f" and {len(names) - _SHOWN_TABLES} more" if len(names) > _SHOWN_TABLES else ""
    return f"tables {', '.join(shown)}{more}"


def head_error(path: Path) -> StoreVersionError:
    """The refusal of upstream HEAD's v17 store: what the file holds, why it is not read, and
    what to do instead, in one line."""
    try:
        mode = f"file mode {path.stat().st_mode & 0o777:04o}"
    except OSError:
        mode = "file mode unknown"
    return StoreVersionError(
        f"{path} has schema version {HEAD_SCHEMA_VERSION} and application_id "
        f'{HEAD_APPLICATION_ID:#010x} ("DSHP": upstream HEAD\'s store); '
        f"found {found_tables(path)}; {mode}. "
        "No upstream source or recording available to this build describes the v17 layout "
        "(its sources hold schema versions 3 and 4 only), so it is not read; nothing was "
        "written. To use these sessions: have upstream HEAD write them with its JSONL "
        "persistence and run `dsh-sessions convert ROOT DST` on that root (HEAD's JSONL logs "
        "are read losslessly); to have v17 read, add upstream HEAD's "
        "session-persistence-sqlite sources (its schema.ts) to the upstream sources this "
        "build follows (../shared/upstream-src)"
    )


def version_error(path: Path, found: int, application_id: int = 0) -> StoreVersionError:
    """The one-line refusal of a file whose schema version this code does not read."""
    if found == HEAD_SCHEMA_VERSION and application_id == HEAD_APPLICATION_ID:
        return head_error(path)
    owner = f" and application_id {application_id:#010x}" if application_id else ""
    return StoreVersionError(
        f"{path} has schema version {found}{owner}; this code reads schema version "
        f"{SCHEMA_VERSION} (upstream's) and {DSH_SCHEMA_VERSION} (dsh-py's) only and does "
        f"not migrate; nothing was written"
    )


def create_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists: session logs hold
    conversations, and SQLite gives its ``-wal`` / ``-shm`` files the database's mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def stamp_if_fresh(connection: sqlite3.Connection, layout: Layout) -> Layout:
    """Inside ``BEGIN IMMEDIATE``: create ``layout``'s schema if nobody has yet.

    Two processes may both see a fresh file; the write lock serialises them and the second
    finds the first one's stamp, whose layout it returns (and then uses).
    """
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    application_id = int(connection.execute("PRAGMA application_id").fetchone()[0])
    found = _known(version, application_id)
    if found is not None:
        return found
    if version != 0:
        raise version_error(Path(connection.execute("PRAGMA database_list").fetchone()[2]), version)
    for statement in schema_sql(layout):
        connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {layout.version}")
    if layout.application_id:
        connection.execute(f"PRAGMA application_id = {layout.application_id}")
    return layout

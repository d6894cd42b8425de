"""Reading any SQLite session store this code knows, without writing a byte: upstream's
June schema version 3, upstream's v4 (with dsh-py's side tables or without), and dsh-py's
layout 1004.

What the store itself refuses to open (June's v3: it has no surface columns and is not
migrated) is read here for inspection and conversion only (``dsh-sessions``). The connection
is ``immutable=1`` (no ``-wal`` / ``-shm`` appears), so a file is never changed, whatever it is.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from dsh_core import (
    Event,
    LogFormatError,
    SessionHeader,
    SessionLog,
    SessionNotFoundError,
    StoreCorruptError,
    StoreVersionError,
)
from dsh_persistence_sqlite._rows import (
    events_from_cursor,
    events_select,
    header_from_row,
    header_select,
)
from dsh_persistence_sqlite._schema import (
    DSH_APPLICATION_ID,
    DSH_SCHEMA_VERSION,
    SCHEMA_VERSION,
    Layout,
    has_side_tables,
    inspect_file,
    readonly_connection,
    version_error,
)

__all__ = ["JUNE_SCHEMA_VERSION", "ReadOnlySqliteStore"]

JUNE_SCHEMA_VERSION = 3
"""Upstream's June layout: v4 without ``source_event_seqs`` and ``surface_op``."""

# June's v3 has neither the surface columns nor anything beyond v4's header.
_JUNE_HEADER = (
    "SELECT s.id, s.version, s.created_at, s.cwd, s.parent_session, s.seed_length, "
    "NULL, NULL, NULL FROM sessions s"
)
_JUNE_EVENTS = (
    "SELECT e.seq, e.type, e.time, e.data, NULL, NULL, NULL, 0 FROM events e "
    "WHERE e.session_id = ? ORDER BY e.seq"
)


class ReadOnlySqliteStore:
    """Every session of an SQLite store of schema version 3, 4 or 1004, read-only.

    Logs come back exactly as stored: an open turn stays open, nothing is repaired. Close it
    when done (``contextlib.closing`` fits).

    Args:
        path: the database file.

    Raises:
        StoreVersionError: any other version (HEAD's v17 included: its layout is not in the
            sources this build follows), in one line naming the file and the version.
        StoreCorruptError: not an SQLite file, truncated, or tables missing.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._source = str(self.path)
        if not self.path.is_file():
            raise SessionNotFoundError(f"{self.path}: no such SQLite store file")
        self.version = self._version()
        self._connection = readonly_connection(self.path)
        if self.version == JUNE_SCHEMA_VERSION:
            self._header, self._events = _JUNE_HEADER, _JUNE_EVENTS
        else:
            layout = Layout.V4 if self.version == SCHEMA_VERSION else Layout.DSH
            side = layout is Layout.V4 and has_side_tables(self._connection)
            self._header = header_select(layout, side)
            self._events = events_select(layout, side, "0")

    def _version(self) -> int:
        with contextlib.closing(readonly_connection(self.path)) as connection:
            try:
                version = int(connection.execute("PRAGMA user_version").fetchone()[0])
                application_id = int(connection.execute("PRAGMA application_id").fetchone()[0])
            except sqlite3.DatabaseError as exc:
                raise StoreCorruptError(
                    f"{self.path} is not a readable SQLite database ({exc}); nothing was written"
                ) from None
        if version == JUNE_SCHEMA_VERSION and application_id == 0:
            return version
        if version == 0:
            inspect_file(self.path)  # refuses one holding tables: unversioned or foreign
            raise StoreVersionError(
                f"{self.path} holds no session store (user_version 0 and no tables); "
                f"nothing was written"
            )
        if (version, application_id) not in (
            (SCHEMA_VERSION, 0),
            (DSH_SCHEMA_VERSION, DSH_APPLICATION_ID),
        ):
            raise version_error(self.path, version, application_id)
        inspect_file(self.path)  # the column check of the layouts the store itself opens
        return version

    def list_sessions(self) -> list[SessionHeader]:
        """Every session's header, ordered by ``(createdAt, id)``."""
        rows = self._execute(self._header).fetchall()
        headers = [header_from_row(row, self._source) for row in rows]
        headers.sort(key=lambda header: (header.created_at, header.id))
        return headers

    def load(self, session_id: str) -> SessionLog:
        """The session's header and every event row, exactly as stored.

        Raises:
            SessionNotFoundError, LogFormatError (naming the row and column).
        """
        row = self._execute(f"{self._header} WHERE s.id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id} in {self.path}")
        header = header_from_row(row, self._source)
        cursor = self._execute(self._events, (session_id,))
        events: list[Event] = []
        events, torn_from = events_from_cursor(cursor, self._source, committed_end=1 << 62)
        assert torn_from is None  # committed_end past every row: damage raises instead
        return SessionLog(header, events)

    def _execute(self, sql: str, parameters: tuple[str, ...] = ()) -> sqlite3.Cursor:
        try:
            return self._connection.execute(sql, parameters)
        except sqlite3.DatabaseError as exc:
            raise LogFormatError(
                self._source, None, None, f"cannot read the store: {exc}"
            ) from None

    def close(self) -> None:
        """Close the connection. Idempotent."""
        self._connection.close()

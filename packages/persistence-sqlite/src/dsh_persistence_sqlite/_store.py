"""``SqliteSessionStore``: every session of a workspace in one SQLite database file.

Durability comes from SQLite itself (WAL, ``synchronous=FULL``, one ``BEGIN IMMEDIATE``
transaction per appended batch), so there is no torn tail to repair: a batch is either
committed whole or absent. A writer killed between batches can still leave a turn open,
which :meth:`SqliteSessionStore.load` closes in its view and :meth:`SqliteSessionStore.resume`
closes durably, exactly like the JSONL store.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
import threading
import urllib.parse
from collections.abc import Generator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from dsh_core import (
    CreateOptions,
    Event,
    LogFormatError,
    Session,
    SessionBusyError,
    SessionExistsError,
    SessionHeader,
    SessionIdError,
    SessionLog,
    SessionNotFoundError,
    StoreAccessError,
    StoreCorruptError,
    WriterLock,
    check_batch,
    close_open_turn,
    prepare_header,
    render_log,
)
from dsh_persistence_sqlite._rows import (
    event_row,
    event_side_rows,
    events_from_cursor,
    events_select,
    header_from_row,
    header_row,
    header_select,
    header_side_row,
    locate_undecodable,
)
from dsh_persistence_sqlite._schema import (
    Layout,
    create_private,
    has_side_tables,
    inspect_file,
    side_table_sql,
    stamp_if_fresh,
)

__all__ = ["SqliteSessionStore"]

_V4_EVENT = "session_id, seq, type, time, data, source_event_seqs, surface_op"
_V4_SESSION = "id, version, created_at, cwd, parent_session, seed_length"
_INSERT_EVENT = {
    Layout.V4: f"INSERT INTO events ({_V4_EVENT}) VALUES (?, ?, ?, ?, ?, ?, ?)",
    Layout.DSH: f"INSERT INTO events ({_V4_EVENT}, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
}
_INSERT_SESSION = {
    Layout.V4: f"INSERT INTO sessions ({_V4_SESSION}) VALUES (?, ?, ?, ?, ?, ?)",
    Layout.DSH: (
        f"INSERT INTO sessions ({_V4_SESSION}, origin, delegation_depth, extra) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ),
}
_INSERT_SIDE_SESSION = "INSERT INTO dsh_sessions VALUES (?, ?, ?, ?)"
_INSERT_SIDE_EVENT = "INSERT INTO dsh_events VALUES (?, ?, ?)"
_CORRUPT_CODES = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})
# How the sqlite3 module reports a TEXT value that is not UTF-8.
_UNDECODABLE = re.compile(r"Could not decode to UTF-8 column '([^']*)'")
# Another process holding the write lock makes BEGIN IMMEDIATE wait up to this long.
_BUSY_TIMEOUT_S = 30.0


class _SqliteWriter:
    """The write handle on one session: holds its lock, appends one transaction per batch."""

    def __init__(self, store: SqliteSessionStore, session_id: str, lock: WriterLock) -> None:
        self._store = store
        self._id = session_id
        self._lock: WriterLock | None = lock

    def append(self, events: Sequence[Event]) -> None:
        if self._lock is None:
            raise ValueError(f"session {self._id}: the writer is closed")
        if not events:
            return
        layout = self._store.layout
        rows = [event_row(self._id, event, layout) for event in events]
        side = event_side_rows(self._id, events) if layout is Layout.V4 else []
        with self._store._transaction() as connection:
            last = connection.execute(
                "SELECT max(seq) FROM events WHERE session_id = ?", (self._id,)
            ).fetchone()[0]
            check_batch(f"session {self._id}", events, 0 if last is None else int(last) + 1)
            connection.executemany(_INSERT_EVENT[layout], rows)
            self._store._write_side(connection, None, side)

    def close(self) -> None:
        if self._lock is not None:
            lock, self._lock = self._lock, None
            lock.release()


class SqliteSessionStore:
    """Session logs in one SQLite database: upstream's schema version 4 exactly (what v4 has
    no column for kept in side tables, see ``_schema``), or dsh-py's former layout 1004.

    Opening never writes to a file it does not recognise: an absent or empty file becomes a
    new store (mode 0600) of ``layout``, a version-4 or version-1004 store is used as it is
    (whatever ``layout`` says), and anything else is refused with its bytes untouched. Both
    layouts keep every header and envelope field.

    Args:
        path: the database file (created, with its parent directories, when absent).
        layout: the layout of a fresh file; upstream's v4 by default.

    Raises:
        StoreVersionError: another schema version, or another application's database.
        StoreCorruptError: not an SQLite file, truncated, or missing this schema's tables.
        StoreAccessError: the path is a directory, its parent is a file, or SQLite cannot
            open it.
    """

    def __init__(self, path: Path, layout: Layout = Layout.V4) -> None:
        self.path = Path(path)
        self.layout = layout
        self._source = str(self.path)
        self._mutex = threading.RLock()
        try:
            state = inspect_file(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if state.fresh:
                create_private(self.path)
            else:
                assert state.layout is not None
                self.layout = state.layout
            connection = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            # Writers lock by the real file, so a symlink to the same database shares them.
            self._locks_dir = Path(f"{self.path.resolve()}.locks")
        except IsADirectoryError:
            raise StoreAccessError(
                self._source, "is a directory, not an SQLite store file"
            ) from None
        except OSError as exc:
            raise StoreAccessError(self._source, f"cannot open the store: {exc.strerror}") from None
        except sqlite3.OperationalError as exc:
            raise StoreAccessError(self._source, f"cannot open the store: {exc}") from None
        try:
            with self._guard():
                connection.execute("PRAGMA trusted_schema = OFF")
                connection.execute("PRAGMA foreign_keys = ON")
                mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreCorruptError(
                        f"{self.path}: could not switch to WAL mode (journal_mode is {mode})"
                    )
                connection.execute("PRAGMA synchronous = FULL")
                if state.fresh:
                    connection.execute("BEGIN IMMEDIATE")
                    try:
                        self.layout = stamp_if_fresh(connection, self.layout)
                        connection.execute("COMMIT")
                    except BaseException:
                        connection.execute("ROLLBACK")
                        raise
        except BaseException:
            connection.close()
            raise
        self._valid = _json_valid_expression(connection)
        self._side_tables = False
        self._select_header = self._select_events = ""
        self._connection: sqlite3.Connection | None = connection
        self._selects(connection)

    # --- SessionStore protocol --------------------------------------------------------------

    def create(self, options: CreateOptions) -> Session:
        """Insert the header and the seed (renumbered from 0) in one transaction.

        Raises:
            SessionExistsError: the id is taken (or being created by another writer).
        """
        header = prepare_header(options)
        seed = [event.with_seq(index) for index, event in enumerate(options.seed)]
        rows = [event_row(header.id, event, self.layout) for event in seed]
        side = self._side_rows(header, seed)
        if self._exists(header.id):
            raise SessionExistsError(f"session {header.id} already exists in {self.path}")
        try:
            lock = self._acquire(header.id)
        except SessionBusyError:
            raise SessionExistsError(
                f"session {header.id} is being written by another writer of {self.path}"
            ) from None
        try:
            with self._transaction() as connection:
                try:
                    connection.execute(
                        _INSERT_SESSION[self.layout], header_row(header, self.layout)
                    )
                except sqlite3.IntegrityError:
                    raise SessionExistsError(
                        f"session {header.id} already exists in {self.path}"
                    ) from None
                connection.executemany(_INSERT_EVENT[self.layout], rows)
                self._write_side(connection, *side)
        except BaseException:
            lock.release()
            raise
        return Session(header, seed, _SqliteWriter(self, header.id, lock))

    def resume(self, session_id: str) -> Session:
        """Open a stored session for writing, closing a turn left open by a crash durably.

        A crash tail (damaged rows after the last ``turn/end``) is deleted first.

        Raises:
            SessionNotFoundError, SessionBusyError, LogFormatError, StoreCorruptError.
        """
        self._require(session_id)
        lock = self._acquire(session_id)
        try:
            log, torn_from = self._read(session_id)
            if torn_from is not None:
                with self._transaction() as connection:
                    connection.execute(
                        "DELETE FROM events WHERE session_id = ? AND seq >= ?",
                        (session_id, torn_from),
                    )
            writer = _SqliteWriter(self, session_id, lock)
            closers = close_open_turn(log.events)
            if closers:
                writer.append(closers)
        except BaseException:
            lock.release()
            raise
        return Session(log.header, log.events + closers, writer)

    def load(self, session_id: str) -> SessionLog:
        """Read a session without writing; a crash tail (damaged rows after the last
        ``turn/end``) is cut and an open turn closed, in the returned view only.

        Raises:
            SessionNotFoundError, LogFormatError, StoreCorruptError.
        """
        log, _ = self._read(session_id)
        log.events.extend(close_open_turn(log.events))
        return log

    def list_sessions(self) -> list[SessionHeader]:
        """Every session's header, ordered by ``(createdAt, id)``.

        Raises:
            LogFormatError: a ``sessions`` row is damaged.
        """
        with self._mutex, self._guard():
            connection = self._conn()
            self._selects(connection)
            rows = connection.execute(self._select_header).fetchall()
        headers = [header_from_row(row, self._source) for row in rows]
        headers.sort(key=lambda header: (header.created_at, header.id))
        return headers

    def close(self) -> None:
        """Close the database connection. Idempotent."""
        with self._mutex:
            if self._connection is not None:
                connection, self._connection = self._connection, None
                connection.close()

    # --- extras -----------------------------------------------------------------------------

    def import_log(self, log: SessionLog) -> None:
        """Store a whole log as it is: the header with every field (``createdAt``, unknown
        keys…) and the events with their own seqs, in one transaction (``dsh-sessions
        convert``).

        Raises:
            SessionExistsError: the id is taken; nothing is written.
            SeqError: the events do not run 0, 1, 2…
        """
        header = log.header
        self._check_id(header.id)
        check_batch(f"session {header.id}", log.events, 0)
        rows = [event_row(header.id, event, self.layout) for event in log.events]
        side = self._side_rows(header, log.events)
        with self._transaction() as connection:
            try:
                connection.execute(_INSERT_SESSION[self.layout], header_row(header, self.layout))
            except sqlite3.IntegrityError:
                raise SessionExistsError(
                    f"session {header.id} already exists in {self.path}"
                ) from None
            connection.executemany(_INSERT_EVENT[self.layout], rows)
            self._write_side(connection, *side)

    def export_jsonl(self, session_id: str) -> str:
        """The stored log as DSH JSONL text (:func:`dsh_core.render_log`), rows exactly as
        written: an open turn is *not* closed, so the text matches what a JSONL store holding
        the same batches would have on disk.

        Raises:
            SessionNotFoundError, LogFormatError, StoreCorruptError.
        """
        log, _ = self._read(session_id)
        return render_log(log.header, log.events)

    def __enter__(self) -> SqliteSessionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteSessionStore({str(self.path)!r})"

    # --- internals --------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise ValueError(f"the store {self.path} is closed")
        return self._connection

    @contextlib.contextmanager
    def _guard(self, session_id: str | None = None) -> Generator[None]:
        """Turn SQLite's errors into typed ones naming the file (and the row, for bad text).

        Corruption codes become :class:`StoreCorruptError`; text that is not UTF-8 a
        :class:`LogFormatError` naming the table, column and row; any other operational
        failure (a lock timeout, an I/O error, a read-only file) :class:`StoreAccessError`.
        """
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorname", None) in _CORRUPT_CODES:
                raise StoreCorruptError(f"{self.path} is damaged: {exc}") from None
            undecodable = _UNDECODABLE.match(str(exc))
            if undecodable is not None:
                field = locate_undecodable(self._conn(), undecodable.group(1), session_id)
                raise LogFormatError(
                    self._source, None, field, "the stored text is not valid UTF-8"
                ) from None
            if isinstance(exc, sqlite3.OperationalError):
                raise StoreAccessError(self._source, str(exc)) from None
            raise

    @contextlib.contextmanager
    def _transaction(self) -> Generator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls everything back."""
        with self._mutex, self._guard():
            connection = self._conn()
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def _selects(self, connection: sqlite3.Connection) -> None:
        """The load queries of this file's layout; a v4 file's side tables may have been
        created since (by this store or another process), so their absence is looked up again
        until they exist (a v4 file that never needs them costs one small query per read)."""
        if self._select_header and (self.layout is not Layout.V4 or self._side_tables):
            return
        if self.layout is Layout.V4:
            self._side_tables = has_side_tables(connection)
        self._select_header = header_select(self.layout, self._side_tables)
        self._select_events = events_select(self.layout, self._side_tables, self._valid)

    def _side_rows(
        self, header: SessionHeader, events: Sequence[Event]
    ) -> tuple[tuple[Any, ...] | None, list[tuple[Any, ...]]]:
        """A v4 file's side rows for a header and its events (none for the 1004 layout,
        whose own columns hold those fields)."""
        if self.layout is not Layout.V4:
            return None, []
        return header_side_row(header), event_side_rows(header.id, events)

    def _write_side(
        self,
        connection: sqlite3.Connection,
        side_header: tuple[Any, ...] | None,
        side_events: list[tuple[Any, ...]],
    ) -> None:
        """Inside the write transaction: the side rows, creating the side tables first if
        this is the first time the file needs them (so a file that never does keeps
        upstream's two tables only)."""
        if side_header is None and not side_events:
            return
        if not self._side_tables:
            for statement in side_table_sql():
                connection.execute(statement)
        if side_header is not None:
            connection.execute(_INSERT_SIDE_SESSION, side_header)
        connection.executemany(_INSERT_SIDE_EVENT, side_events)

    def _acquire(self, session_id: str) -> WriterLock:
        path = self._locks_dir / _lock_name(session_id)
        try:
            self._locks_dir.mkdir(exist_ok=True)
        except OSError as exc:
            raise StoreAccessError(
                str(path), f"cannot open the writer lock: {exc.strerror}"
            ) from None
        return WriterLock.acquire(path, session_id, self.path)

    def _exists(self, session_id: str) -> bool:
        with self._mutex, self._guard():
            row = (
                self._conn()
                .execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,))
                .fetchone()
            )
        return row is not None

    def _check_id(self, session_id: str) -> None:
        ok = isinstance(session_id, str) and session_id  # pyright: ignore[reportUnnecessaryIsInstance]
        try:
            ok = ok and bool(session_id.encode("utf-8"))
        except UnicodeEncodeError:
            ok = False
        if not ok:
            raise SessionIdError(
                f"{self._source}: field 'id': session id {session_id!r} is not a non-empty "
                f"UTF-8 string"
            )

    def _require(self, session_id: str) -> None:
        self._check_id(session_id)
        if not self._exists(session_id):
            raise self._not_found(session_id)

    def _not_found(self, session_id: str) -> Exception:
        with self._mutex, self._guard():
            orphan = (
                self._conn()
                .execute("SELECT 1 FROM events WHERE session_id = ? LIMIT 1", (session_id,))
                .fetchone()
            )
        if orphan is not None:
            return LogFormatError(
                self._source,
                None,
                "sessions.id",
                f"events rows exist for session {session_id!r} but its sessions row is missing",
            )
        return SessionNotFoundError(f"no session {session_id} in {self.path}")

    def _read(self, session_id: str) -> tuple[SessionLog, int | None]:
        """The stored log without its crash tail, and the seq where that tail begins."""
        self._check_id(session_id)
        with self._mutex, self._guard(session_id):
            connection = self._conn()
            # One read transaction: the header and the events come from the same snapshot.
            connection.execute("BEGIN")
            try:
                self._selects(connection)
                header_data: tuple[Any, ...] | None = connection.execute(
                    f"{self._select_header} WHERE s.id = ?", (session_id,)
                ).fetchone()
                if header_data is None:
                    raise self._not_found(session_id)
                header = header_from_row(header_data, self._source)
                # walks the primary key backwards: the last turn/end is near the end
                last_end: tuple[int] | None = connection.execute(
                    "SELECT seq FROM events WHERE session_id = ? AND type = 'turn/end' "
                    "ORDER BY seq DESC LIMIT 1",
                    (session_id,),
                ).fetchone()
                committed_end = -1 if last_end is None else int(last_end[0])
                cursor = connection.execute(self._select_events, (session_id,))
                events, torn_from = events_from_cursor(cursor, self._source, committed_end)
            finally:
                connection.execute("COMMIT")
        return SessionLog(header, events), torn_from


def _json_valid_expression(connection: sqlite3.Connection) -> str:
    """``json_valid(data)`` where this SQLite has JSON functions, else ``0`` (slower loads)."""
    try:
        connection.execute("SELECT json_valid('{}')")
    except sqlite3.OperationalError:
        return "0"
    return "json_valid(e.data)"


def _lock_name(session_id: str) -> str:
    """A file name for ``session_id``'s lock: the id quoted, hashed when too long."""
    quoted = urllib.parse.quote(session_id, safe="-_")
    if len(quoted) > 200:
        quoted = hashlib.sha256(session_id.encode()).hexdigest()
    return f"{quoted}.lock"

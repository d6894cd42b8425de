"""``PostgresSessionStore``: the sessions of one sessions root in a PostgreSQL database.

A root is a namespace (a row of ``namespaces``), so one database holds the sessions of many
runs, machines and teams. A session's writer holds a PostgreSQL advisory lock on its own
connection: the server drops it when that connection dies (a killed writer), so a second
writer meets :class:`~dsh_core.SessionBusyError` exactly as with the file stores, and nobody
has to clean up. Each appended batch is one transaction, which also notifies the channel
``<schema>_events`` so that a reader can follow a session as it grows
(:meth:`PostgresSessionStore.follow`).
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Sequence
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg import sql

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
    check_batch,
    close_open_turn,
    dumps_event,
    dumps_header,
    prepare_header,
    read_log_text,
    render_log,
)
from dsh_persistence_postgres._pool import Connection, Server, guard, server_for
from dsh_persistence_postgres._rows import events_from_rows, header_from_text
from dsh_persistence_postgres._schema import LOCK_KEY, check_schema
from dsh_persistence_postgres._settings import PostgresSettings

__all__ = ["PostgresSessionStore"]


class _Queries:
    """The statements of one schema, composed once."""

    def __init__(self, schema: str) -> None:
        s = sql.Identifier(schema)
        self.channel = f"{schema}_events"
        self.listen = sql.SQL("LISTEN {}").format(sql.Identifier(self.channel))
        self.namespace = sql.SQL("SELECT id FROM {}.namespaces WHERE root = %s").format(s)
        self.add_namespace = sql.SQL(
            "INSERT INTO {}.namespaces (root) VALUES (%s) ON CONFLICT (root) DO NOTHING"
        ).format(s)
        self.drop_namespace = sql.SQL("DELETE FROM {}.namespaces WHERE root = %s").format(s)
        self.exists = sql.SQL("SELECT 1 FROM {}.sessions WHERE namespace = %s AND id = %s").format(
            s
        )
        self.insert_session = sql.SQL(
            "INSERT INTO {}.sessions (namespace, id, created_at, parent_session, seed_length, "
            "header) VALUES (%s, %s, %s, %s, %s, %s)"
        ).format(s)
        self.insert_event = sql.SQL(
            "INSERT INTO {}.events (namespace, session_id, seq, type, time, line) "
            "VALUES (%s, %s, %s, %s, %s, %s)"
        ).format(s)
        self.last_seq = sql.SQL(
            "SELECT max(seq) FROM {}.events WHERE namespace = %s AND session_id = %s"
        ).format(s)
        self.header = sql.SQL(
            "SELECT header FROM {}.sessions WHERE namespace = %s AND id = %s"
        ).format(s)
        self.headers = sql.SQL("SELECT id, header FROM {}.sessions WHERE namespace = %s").format(s)
        self.events_after = sql.SQL(
            "SELECT seq, line FROM {}.events WHERE namespace = %s AND session_id = %s "
            "AND seq > %s ORDER BY seq"
        ).format(s)


class _PostgresWriter:
    """The write handle on one session: its own connection holds the advisory lock, and
    each batch is one transaction on it."""

    def __init__(self, store: PostgresSessionStore, session_id: str, connection: Connection):
        self._store = store
        self._id = session_id
        self._connection: Connection | None = connection
        self._mutex = threading.Lock()

    def insert(self, events: Sequence[Event], header: SessionHeader | None = None) -> None:
        """One transaction: the header (on create), the events, and the notification."""
        store = self._store
        rows = [_event_row(store.namespace_id, self._id, event) for event in events]
        with self._mutex, guard(store.where):
            connection = self._conn()
            with connection.transaction(), connection.cursor() as cursor:
                if header is not None:
                    try:
                        cursor.execute(store.queries.insert_session, _header_row(store, header))
                    except psycopg.errors.UniqueViolation:
                        raise SessionExistsError(
                            f"session {header.id} already exists in {store.where}"
                        ) from None
                else:
                    cursor.execute(store.queries.last_seq, (store.namespace_id, self._id))
                    row = cursor.fetchone()
                    last = None if row is None else row[0]
                    next_seq = 0 if last is None else int(str(last)) + 1
                    check_batch(f"session {self._id} ({store.where})", events, next_seq)
                if rows:
                    cursor.executemany(store.queries.insert_event, rows)
                    payload = f"{store.namespace_id}\t{events[-1].seq + 1}\t{self._id}"
                    cursor.execute("SELECT pg_notify(%s, %s)", (store.queries.channel, payload))

    def append(self, events: Sequence[Event]) -> None:
        if self._connection is None:
            raise ValueError(f"session {self._id}: the writer is closed")
        if events:
            self.insert(events)

    def close(self) -> None:
        with self._mutex:
            if self._connection is not None:
                connection, self._connection = self._connection, None
                connection.close()  # the server releases the advisory lock with it

    def _conn(self) -> Connection:
        if self._connection is None:
            raise ValueError(f"session {self._id}: the writer is closed")
        return self._connection


def _header_row(store: PostgresSessionStore, header: SessionHeader) -> tuple[object, ...]:
    return (
        store.namespace_id,
        header.id,
        header.created_at,
        header.parent_session,
        header.seed_length,
        dumps_header(header),
    )


def _event_row(namespace: int, session_id: str, event: Event) -> tuple[object, ...]:
    try:
        line = dumps_event(event)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"event {event.type!r} at seq {event.seq} carries data that is not JSON: {exc}"
        ) from None
    return (namespace, session_id, event.seq, event.type, event.time, line)


class PostgresSessionStore:
    """Session logs of one sessions root in a PostgreSQL database (schema version 1).

    Opening makes the store's tables when the schema holds none, and refuses a schema of
    another version or another application without writing anything. Reading a root that
    never stored anything writes nothing either.

    Args:
        root: the sessions root; its absolute path names the namespace (nothing is written
            to the filesystem).
        settings: where the server is (default: ``PostgresSettings()``, from ``DSH_POSTGRES_*``
            and libpq's ``PG*`` variables).

    Raises:
        StoreAccessError: the server cannot be reached (the message names it, never the
            password).
        StoreVersionError: the schema holds another version or another application's tables.
    """

    def __init__(self, root: Path | str, settings: PostgresSettings | None = None) -> None:
        self.settings = settings if settings is not None else PostgresSettings()
        self.root = str(Path(root).absolute())
        self.schema = self.settings.schema_name
        self._server: Server | None = server_for(self.settings)
        self.where = f"{self._server.name} schema {self.schema} root {self.root}"
        self.queries = _Queries(self.schema)
        self._namespace: int | None = None
        self._ensure_schema()

    # --- SessionStore protocol --------------------------------------------------------------

    def create(self, options: CreateOptions) -> Session:
        """Insert the header and the seed (renumbered from 0) in one transaction.

        Raises:
            SessionExistsError: the id is taken (or being created by another writer).
        """
        header = prepare_header(options)
        self._check_id(header.id)
        seed = [event.with_seq(index) for index, event in enumerate(options.seed)]
        self._namespace_id(create=True)
        if self._exists(header.id):
            raise SessionExistsError(f"session {header.id} already exists in {self.where}")
        try:
            writer = self._writer(header.id)
        except SessionBusyError:
            raise SessionExistsError(
                f"session {header.id} is being written by another writer of {self.where}"
            ) from None
        try:
            writer.insert(seed, header)
        except BaseException:
            writer.close()
            raise
        return Session(header, seed, writer)

    def resume(self, session_id: str) -> Session:
        """Open a stored session for writing, closing a turn left open by a crash durably.

        Raises:
            SessionNotFoundError, SessionBusyError, LogFormatError.
        """
        self._check_id(session_id)
        if self._namespace_id() is None or not self._exists(session_id):
            raise self._not_found(session_id)
        writer = self._writer(session_id)
        try:
            log = self._read(session_id)
            closers = close_open_turn(log.events)
            if closers:
                writer.append(closers)
        except BaseException:
            writer.close()
            raise
        return Session(log.header, log.events + closers, writer)

    def load(self, session_id: str) -> SessionLog:
        """Read a session without writing; a turn left open is closed in the view only.

        Raises:
            SessionNotFoundError, LogFormatError (naming the session and the row's seq).
        """
        log = self._read(session_id)
        log.events.extend(close_open_turn(log.events))
        return log

    def list_sessions(self) -> list[SessionHeader]:
        """Every session's header in this root, ordered by ``(createdAt, id)``.

        Raises:
            LogFormatError: a stored header is damaged (naming the session).
        """
        namespace = self._namespace_id()
        if namespace is None:
            return []
        with self._server_().connection() as connection:
            rows = connection.execute(self.queries.headers, (namespace,)).fetchall()
        headers = [header_from_text(str(text), self._source(str(sid))) for sid, text in rows]
        headers.sort(key=lambda header: (header.created_at, header.id))
        return headers

    def close(self) -> None:
        """Forget the server (the process's pool stays for other stores). Idempotent."""
        self._server = None

    # --- extras -----------------------------------------------------------------------------

    def export_jsonl(self, session_id: str) -> str:
        """The stored log as DSH JSONL text, rows exactly as written (an open turn stays open).

        Raises:
            SessionNotFoundError, LogFormatError.
        """
        log = self._read(session_id)
        return render_log(log.header, log.events)

    def follow(
        self, session_id: str, *, after: int = -1, idle_timeout: float = 5.0
    ) -> Generator[Event]:
        """The session's events with ``seq > after`` as they are committed: first what is
        stored, then each batch as its writer commits it (``LISTEN``/``NOTIFY``), until no
        batch arrives for ``idle_timeout`` seconds.

        Raises:
            SessionNotFoundError: no such session when following starts; LogFormatError.
        """
        self._check_id(session_id)
        namespace = self._namespace_id()
        if namespace is None or not self._exists(session_id):
            raise self._not_found(session_id)
        listener = self._server_().connect()
        try:
            with guard(self.where):
                listener.execute(self.queries.listen)  # before reading: no commit slips by
            last = after
            while True:
                fresh = self._events_after(session_id, last)
                yield from fresh
                last = fresh[-1].seq if fresh else last
                if not self._notified(listener, namespace, session_id, last, idle_timeout):
                    return
        finally:
            listener.close()

    def discard(self) -> None:
        """Delete every session of this root, and the root's namespace (nothing: no-op)."""
        with self._server_().connection() as connection:
            connection.execute(self.queries.drop_namespace, (self.root,))
        self._namespace = None

    def __enter__(self) -> PostgresSessionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresSessionStore({self.root!r}, schema={self.schema!r})"

    # --- internals --------------------------------------------------------------------------

    def _server_(self) -> Server:
        if self._server is None:
            raise ValueError(f"the store {self.where} is closed")
        return self._server

    def _source(self, session_id: str) -> str:
        return f"{self.where} session {session_id}"

    def _ensure_schema(self) -> None:
        server = self._server_()
        if self.schema in server.checked_schemas:
            return
        with server.connection() as connection:
            check_schema(connection, self.schema, server.name, create=True)
        server.checked_schemas.add(self.schema)

    @property
    def namespace_id(self) -> int:
        """The root's namespace id (only once :meth:`create` has made it)."""
        if self._namespace is None:
            raise ValueError(f"{self.where}: the root has no namespace yet")
        return self._namespace

    def _namespace_id(self, *, create: bool = False) -> int | None:
        if self._namespace is not None:
            return self._namespace
        with self._server_().connection() as connection:
            if create:
                connection.execute(self.queries.add_namespace, (self.root,))
            row = connection.execute(self.queries.namespace, (self.root,)).fetchone()
        self._namespace = None if row is None else int(str(row[0]))
        return self._namespace

    def _writer(self, session_id: str) -> _PostgresWriter:
        """A writer holding the session's advisory lock on a connection of its own.

        Raises:
            SessionBusyError: another writer (any process, any machine) holds it.
        """
        connection = self._server_().connect()
        try:
            with guard(self.where):
                row = connection.execute(
                    "SELECT pg_try_advisory_lock(" + LOCK_KEY + ")",
                    (f"{self.schema}:{self.namespace_id}:{session_id}",),
                ).fetchone()
            if row is None or row[0] is not True:
                raise SessionBusyError(
                    f"session {session_id} is open for writing by another writer of "
                    f"{self.where} (it holds the session's PostgreSQL advisory lock)"
                )
        except BaseException:
            connection.close()
            raise
        return _PostgresWriter(self, session_id, connection)

    def _check_id(self, session_id: str) -> None:
        ok = isinstance(session_id, str) and bool(session_id)  # pyright: ignore[reportUnnecessaryIsInstance]
        if not ok or "\x00" in session_id:
            raise SessionIdError(
                f"{self.where}: field 'id': session id {session_id!r} is not a non-empty "
                f"string without NUL"
            )
        try:
            session_id.encode("utf-8")
        except UnicodeEncodeError:
            raise SessionIdError(
                f"{self.where}: field 'id': session id {session_id!r} is not valid UTF-8"
            ) from None

    def _exists(self, session_id: str) -> bool:
        with self._server_().connection() as connection:
            row = connection.execute(
                self.queries.exists, (self.namespace_id, session_id)
            ).fetchone()
        return row is not None

    def _not_found(self, session_id: str) -> SessionNotFoundError:
        return SessionNotFoundError(f"no session {session_id} in {self.where}")

    def _read(self, session_id: str) -> SessionLog:
        self._check_id(session_id)
        namespace = self._namespace_id()
        if namespace is None:
            raise self._not_found(session_id)
        source = self._source(session_id)
        # one snapshot: the header and the events are from the same moment
        with self._server_().connection() as connection, connection.transaction():
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = connection.execute(self.queries.header, (namespace, session_id)).fetchone()
            if row is None:
                raise self._not_found(session_id)
            rows = connection.execute(
                self.queries.events_after, (namespace, session_id, -1)
            ).fetchall()
        header_text = str(row[0])
        lines = [str(line) for _, line in rows]
        try:
            # the fast path: the rows are a JSONL log, read as one text
            log = read_log_text("\n".join([header_text, *lines]), source)
        except LogFormatError:
            log = None  # find which row, and say so
        if log is None or len(log.events) != len(rows):
            header = header_from_text(header_text, source)
            return SessionLog(header, events_from_rows(rows, source))
        return log

    def _events_after(self, session_id: str, after: int) -> list[Event]:
        source = self._source(session_id)
        with self._server_().connection() as connection:
            rows = connection.execute(
                self.queries.events_after, (self.namespace_id, session_id, after)
            ).fetchall()
        return events_from_rows(rows, source, first=after + 1)

    def _notified(
        self, listener: Connection, namespace: int, session_id: str, last: int, timeout: float
    ) -> bool:
        """Wait for a commit to the session past ``last``; ``False`` after ``timeout`` idle."""
        with guard(self.where):
            for note in listener.notifies(timeout=timeout):
                space, next_seq, sid = note.payload.split("\t", 2)
                if space == str(namespace) and sid == session_id and int(next_seq) > last + 1:
                    return True
        return False

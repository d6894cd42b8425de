"""One connection pool per server and process, and psycopg's errors as the store's own."""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Generator

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from dsh_core import StoreAccessError
from dsh_persistence_postgres._settings import PostgresSettings, describe_server

__all__ = ["Server", "guard", "server_for"]

Connection = psycopg.Connection[tuple[object, ...]]


@contextlib.contextmanager
def guard(where: str) -> Generator[None]:
    """psycopg's operational failures (server gone, connection lost, a pool timeout) become a
    :class:`StoreAccessError` naming the server; other errors are the caller's to type."""
    try:
        yield
    except PoolTimeout as exc:
        raise StoreAccessError(where, f"no connection from the pool in time ({exc})") from None
    except psycopg.OperationalError as exc:
        raise StoreAccessError(where, f"the server failed: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Server:
    """A database the stores of this process share: its settings, its pool, its name.

    Attributes:
        settings: how it was reached.
        name: ``postgresql://user@host:port/db`` for messages (never the password).
        checked_schemas: schemas already found (or made) to be this code's version.
    """

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self.name = describe_server(settings.dsn)
        self.checked_schemas: set[str] = set()
        # One direct connection first: libpq's own reason (refused, no such database, bad
        # password) is a far better message than a pool's timeout.
        self.connect().close()
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            settings.dsn,
            min_size=1,
            max_size=settings.pool_max,
            kwargs={"autocommit": True, "connect_timeout": _timeout(settings)},
            timeout=settings.pool_timeout,
            open=False,
            name=f"dsh-{self.name}",
        )
        with guard(self.name):
            self._pool.open(wait=True, timeout=settings.connect_timeout)

    def connect(self) -> Connection:
        """A new connection of its own (a writer's, a follower's), autocommit.

        Raises:
            StoreAccessError: the server cannot be reached (libpq's reason, no password).
        """
        with guard(self.name):
            return psycopg.connect(
                self.settings.dsn, autocommit=True, connect_timeout=_timeout(self.settings)
            )

    @contextlib.contextmanager
    def connection(self) -> Generator[Connection]:
        """A pooled connection for one short piece of work, returned afterwards."""
        with guard(self.name), self._pool.connection() as connection:
            yield connection

    def close(self) -> None:
        """Close the pool (its connections)."""
        self._pool.close()


def _timeout(settings: PostgresSettings) -> int:
    return max(1, round(settings.connect_timeout))  # libpq takes whole seconds, at least 1


_lock = threading.Lock()
_servers: dict[tuple[int, PostgresSettings], Server] = {}


def server_for(settings: PostgresSettings) -> Server:
    """The shared :class:`Server` of these settings in this process (made on first use).

    Keyed by the process id too: a pool inherited through ``fork`` (the warm agent forks its
    children) belongs to the parent and is never used by the child.

    Raises:
        StoreAccessError: the server cannot be reached.
    """
    key = (os.getpid(), settings)
    with _lock:
        server = _servers.get(key)
        if server is None:
            server = Server(settings)
            _servers[key] = server
        return server


@atexit.register
def _close_all() -> None:
    with _lock:
        mine = [s for (pid, _), s in _servers.items() if pid == os.getpid()]
        _servers.clear()
    for server in mine:
        server.close()

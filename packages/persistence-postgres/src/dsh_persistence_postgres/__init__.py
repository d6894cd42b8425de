"""dsh-persistence-postgres: dsh sessions of many agents on many machines in one PostgreSQL.

``PostgresSessionStore`` implements ``dsh_core.SessionStore`` on psycopg 3 with a connection
pool: a namespace per sessions root, a schema-version row that refuses other versions, one
transaction per appended batch, a session's writer lock as a PostgreSQL advisory lock, and
``follow`` to read a session as it grows (``LISTEN``/``NOTIFY``). Installed, it is the
``postgres`` store backend (``DSH_STORE=postgres``, ``--store postgres``),
configured by ``DSH_POSTGRES_DSN`` or the standard ``PG*`` variables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh_persistence_postgres._settings import PostgresSettings

if TYPE_CHECKING:
    from dsh_persistence_postgres._schema import SCHEMA_VERSION
    from dsh_persistence_postgres._store import PostgresSessionStore

__all__ = [
    # the store
    "PostgresSessionStore",
    "SCHEMA_VERSION",
    # where the server is
    "PostgresSettings",
]


def __getattr__(name: str) -> Any:
    # psycopg (~50 ms of CPU) comes with the store, on first use: looking the installed store
    # backends up (every gate's default set) loads this package.
    if name == "PostgresSessionStore":
        from dsh_persistence_postgres._store import PostgresSessionStore as value  # noqa: PLC0415
    elif name == "SCHEMA_VERSION":
        from dsh_persistence_postgres._schema import SCHEMA_VERSION as value  # noqa: PLC0415
    else:
        raise AttributeError(f"module 'dsh_persistence_postgres' has no attribute {name!r}")
    globals()[name] = value  # the next lookup is a plain module attribute
    return value

"""dsh-persistence-postgres: dsh sessions of many agents on many machines in one PostgreSQL.

``PostgresSessionStore`` implements ``dsh_core.SessionStore`` on psycopg 3 with a connection
pool: a namespace per sessions root, a schema-version row that refuses other versions, one
transaction per appended batch, a session's writer lock as a PostgreSQL advisory lock, and
``follow`` to read a session as it grows (``LISTEN``/``NOTIFY``). Installed, it is the
``postgres`` store backend (``DSH_STORE=postgres``, ``--store postgres``),
configured by ``DSH_POSTGRES_DSN`` or the standard ``PG*`` variables.
"""

from dsh_persistence_postgres._schema import SCHEMA_VERSION
from dsh_persistence_postgres._settings import PostgresSettings
from dsh_persistence_postgres._store import PostgresSessionStore

__all__ = [
    # the store
    "PostgresSessionStore",
    "SCHEMA_VERSION",
    # where the server is
    "PostgresSettings",
]

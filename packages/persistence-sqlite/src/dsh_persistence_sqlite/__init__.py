"""dsh-persistence-sqlite: every dsh session of a workspace in one SQLite database.

``SqliteSessionStore`` implements ``dsh_core.SessionStore`` on schema version 4 (stdlib
``sqlite3``, WAL, ``synchronous=FULL``, one transaction per appended batch) and refuses, without
writing a byte, any file it does not recognise.
"""

from dsh_persistence_sqlite._schema import SCHEMA_VERSION
from dsh_persistence_sqlite._store import SqliteSessionStore

__all__ = [
    "SCHEMA_VERSION",
    "SqliteSessionStore",
]

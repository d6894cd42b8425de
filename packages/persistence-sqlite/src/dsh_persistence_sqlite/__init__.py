"""dsh-persistence-sqlite: every dsh session of a workspace in one SQLite database.

``SqliteSessionStore`` implements ``dsh_core.SessionStore`` (stdlib ``sqlite3``, WAL,
``synchronous=FULL``, one transaction per appended batch) over one of two layouts: upstream's
schema version 4 exactly (``Layout.V4``, the default for a fresh file), which upstream's own
v4 code opens too, with what v4 has no column for in two side tables it never reads; or
dsh-py's former version 1004 (``Layout.DSH``), which adds columns for it instead. It refuses,
without writing a byte, any file it does not recognise.
"""

from dsh_persistence_sqlite._readonly import JUNE_SCHEMA_VERSION, ReadOnlySqliteStore
from dsh_persistence_sqlite._schema import (
    DSH_APPLICATION_ID,
    DSH_SCHEMA_VERSION,
    SCHEMA_VERSION,
    Layout,
)
from dsh_persistence_sqlite._store import SqliteSessionStore

__all__ = [
    # the store
    "SqliteSessionStore",
    "ReadOnlySqliteStore",
    # the layouts
    "DSH_APPLICATION_ID",
    "DSH_SCHEMA_VERSION",
    "JUNE_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "Layout",
]

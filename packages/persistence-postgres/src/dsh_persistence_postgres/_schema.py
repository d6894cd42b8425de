"""The store's tables in one PostgreSQL schema, its version row, and the refusal rule.

Layout (schema version 1), all in the schema ``DSH_POSTGRES_SCHEMA`` (default ``dsh``):

- ``schema_version(version, written_by)``: exactly one row. A schema holding any other
  version is refused, as the SQLite store refuses another ``user_version``: no migration,
  nothing written. A schema that holds tables but no ``schema_version`` belongs to another
  application and is refused too.
- ``namespaces(id, root, created)``: one row per sessions root, so that many runs, machines
  and teams share one database and a root never sees another's sessions.
- ``sessions(namespace, id, created_at, parent_session, seed_length, header)``: ``header`` is
  the DSH header line exactly as a JSONL log starts (every field, ``origin``,
  ``delegationDepth`` and unknown ones included); the columns beside it are for queries.
- ``events(namespace, session_id, seq, type, time, line)``: ``line`` is the event's DSH JSONL
  line, byte for byte what the JSONL store writes (``jsonb`` would reorder keys and lose the
  exact text), so an export is the log as written.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from dsh_core import StoreVersionError

__all__ = ["LOCK_KEY", "SCHEMA_VERSION", "WRITTEN_BY", "check_schema"]

SCHEMA_VERSION = 1
"""The layout this code reads and writes; any other is refused."""
WRITTEN_BY = "dsh-persistence-postgres"

_TABLES = ("events", "namespaces", "schema_version", "sessions")

_CREATE = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE {schema}.schema_version (
    version integer NOT NULL,
    written_by text NOT NULL
);
CREATE TABLE {schema}.namespaces (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    root text NOT NULL UNIQUE,
    created timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE {schema}.sessions (
    namespace bigint NOT NULL REFERENCES {schema}.namespaces (id) ON DELETE CASCADE,
    id text NOT NULL,
    created_at bigint NOT NULL,
    parent_session text,
    seed_length bigint,
    header text NOT NULL,
    PRIMARY KEY (namespace, id)
);
CREATE TABLE {schema}.events (
    namespace bigint NOT NULL,
    session_id text NOT NULL,
    seq bigint NOT NULL,
    type text NOT NULL,
    time bigint NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (namespace, session_id, seq),
    FOREIGN KEY (namespace, session_id)
        REFERENCES {schema}.sessions (namespace, id) ON DELETE CASCADE
);
"""

# Advisory lock keys are one bigint: a 64-bit hash of what is locked, under a seed of our own
# (6583144 is "dsh" in hex) so other applications' hashed keys on the server are as unlikely
# to meet ours. A literal, so that the type checker sees SQL that takes no outside text.
LOCK_KEY = "hashtextextended(%s, 6583144)"


def check_schema(
    connection: psycopg.Connection[tuple[object, ...]], schema: str, where: str, *, create: bool
) -> bool:
    """Check (and with ``create``, make) the store's tables in ``schema``.

    Runs in one transaction holding a transaction-level advisory lock on the schema's name, so
    two processes opening a fresh database at once do not both create it.

    Returns:
        ``True`` when the store's tables are there (now), ``False`` when the schema holds
        none of them and ``create`` is off.

    Raises:
        StoreVersionError: another version, or another application's tables; nothing written.
    """
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(" + LOCK_KEY + ")", (f"schema:{schema}",))
        found = {
            str(row[0])
            for row in connection.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            )
        }
        if not found:
            if not create:
                return False
            connection.execute(sql.SQL(_CREATE).format(schema=sql.Identifier(schema)))
            connection.execute(
                sql.SQL("INSERT INTO {}.schema_version VALUES (%s, %s)").format(
                    sql.Identifier(schema)
                ),
                (SCHEMA_VERSION, WRITTEN_BY),
            )
            return True
        if "schema_version" not in found:
            raise StoreVersionError(
                f"{where}: schema {schema!r} holds tables of another application "
                f"({', '.join(sorted(found))}), not a dsh session store (schema version "
                f"{SCHEMA_VERSION}); refusing to touch it; nothing was written"
            )
        versions = [
            row[0]
            for row in connection.execute(
                sql.SQL("SELECT version FROM {}.schema_version").format(sql.Identifier(schema))
            )
        ]
        if versions != [SCHEMA_VERSION]:
            shown = ", ".join(map(str, versions)) if versions else "no version row"
            raise StoreVersionError(
                f"{where}: schema {schema!r} has schema version {shown}; this code reads "
                f"schema version {SCHEMA_VERSION} only and does not migrate; nothing was written"
            )
        missing = [table for table in _TABLES if table not in found]
        if missing:
            raise StoreVersionError(
                f"{where}: schema {schema!r} says version {SCHEMA_VERSION} but lacks the "
                f"tables {', '.join(missing)}; refusing to touch it; nothing was written"
            )
        return True

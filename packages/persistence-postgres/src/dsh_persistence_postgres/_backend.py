"""The ``postgres`` entry of the ``dsh.stores`` plugin group (see ``dsh_core.plugins``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dsh_core import SessionHeader
from dsh_persistence_postgres._settings import ENV_PREFIXES, PostgresSettings

if TYPE_CHECKING:
    from dsh_persistence_postgres._store import PostgresSessionStore


def _store(root: Path) -> PostgresSessionStore:
    # psycopg (~50 ms of CPU) only when the store is used: every process that looks the
    # installed backends up (the gate's default set, a clean agent environment) loads this one.
    from dsh_persistence_postgres._store import PostgresSessionStore  # noqa: PLC0415

    return PostgresSessionStore(root)


__all__ = ["STORE_BACKEND", "PostgresStoreBackend"]


class PostgresStoreBackend:
    """Opens, lists, exports and discards the namespace of a sessions root in PostgreSQL.

    Where the server is comes from :class:`PostgresSettings` (``DSH_POSTGRES_DSN`` or the
    standard ``PG*`` variables), never from the root: the root only names the namespace.
    """

    name = "postgres"
    settings_model = PostgresSettings
    embedded = False  # a server store: runs only when asked for (--store postgres)
    env_prefixes = ENV_PREFIXES

    def open(self, root: Path) -> PostgresSessionStore:
        """A store over ``root``'s namespace (the tables are made when the schema is empty)."""
        return _store(root)

    def list_sessions(self, root: Path) -> list[SessionHeader]:
        """Every session's header in ``root``'s namespace (none when it has none)."""
        with _store(root) as store:
            return store.list_sessions()

    def export_log(self, root: Path, session_id: str) -> str:
        """The session's rows as DSH JSONL text, exactly as written (an open turn stays open)."""
        with _store(root) as store:
            return store.export_jsonl(session_id)

    def discard(self, root: Path) -> None:
        """Delete the namespace of a finished run's root, every session in it with it."""
        with _store(root) as store:
            store.discard()


STORE_BACKEND = PostgresStoreBackend()
"""What the ``dsh.stores`` entry point ``postgres`` names."""

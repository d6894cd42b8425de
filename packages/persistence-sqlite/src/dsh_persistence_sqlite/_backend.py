"""The ``sqlite`` entry of the ``dsh.stores`` plugin group (see ``dsh_core.plugins``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from dsh_core import SessionHeader, SessionNotFoundError
from dsh_persistence_sqlite._store import SqliteSessionStore

__all__ = ["DATABASE_FILE", "STORE_BACKEND", "SqliteStoreBackend"]

DATABASE_FILE = "sessions.sqlite3"
"""The database a sessions root holds: ``<root>/sessions.sqlite3``."""


class SqliteStoreBackend:
    """Opens, lists and exports the one-database store of a sessions root."""

    name = "sqlite"
    settings_model = None
    embedded = True  # its data lives under the sessions root
    env_prefixes: tuple[str, ...] = ()

    def open(self, root: Path) -> SqliteSessionStore:
        """The store in ``<root>/sessions.sqlite3`` (created when missing)."""
        return SqliteSessionStore(root / DATABASE_FILE)

    def list_sessions(self, root: Path) -> list[SessionHeader]:
        """Every stored session's header (none when the root holds no database)."""
        database = root / DATABASE_FILE
        if not database.is_file():
            return []
        with SqliteSessionStore(database) as store:
            return store.list_sessions()

    def export_log(self, root: Path, session_id: str) -> str:
        """The session's rows as DSH JSONL text, exactly as written (an open turn stays open)."""
        database = root / DATABASE_FILE
        if not database.is_file():
            raise SessionNotFoundError(f"no session {session_id} in {root} (no {DATABASE_FILE})")
        with SqliteSessionStore(database) as store:
            return store.export_jsonl(session_id)

    def discard(self, root: Path) -> None:
        """Remove a finished run's sessions folder, the database with it (none: nothing to do)."""
        shutil.rmtree(root, ignore_errors=True)


STORE_BACKEND = SqliteStoreBackend()
"""What the ``dsh.stores`` entry point ``sqlite`` names."""

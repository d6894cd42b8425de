"""The ``sqlite`` entry of the ``dsh.stores`` plugin group (see ``dsh_core.plugins``)."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict

from dsh_core import SessionHeader, SessionNotFoundError, render_log
from dsh_persistence_sqlite._readonly import ReadOnlySqliteStore
from dsh_persistence_sqlite._schema import Layout
from dsh_persistence_sqlite._store import SqliteSessionStore

__all__ = ["DATABASE_FILE", "STORE_BACKEND", "SqliteSettings", "SqliteStoreBackend"]


class SqliteSettings(BaseSettings):
    """``DSH_SQLITE_*``.

    Attributes:
        layout: the layout of a fresh database (``DSH_SQLITE_LAYOUT``): ``v4`` (the default:
            upstream's schema version 4 exactly, which upstream's v4 opens, what it has no
            column for in side tables) or ``dsh`` (dsh-py's former version 1004). Both keep
            every field; an existing database keeps its own layout.
    """

    model_config = SettingsConfigDict(env_prefix="DSH_SQLITE_", extra="ignore", frozen=True)

    layout: Literal["v4", "dsh"] = "v4"


DATABASE_FILE = "sessions.sqlite3"
"""The database a sessions root holds: ``<root>/sessions.sqlite3``."""


class SqliteStoreBackend:
    """Opens, lists and exports the one-database store of a sessions root."""

    name = "sqlite"
    settings_model = SqliteSettings
    embedded = True  # its data lives under the sessions root
    env_prefixes: tuple[str, ...] = ("DSH_SQLITE_",)

    def open(self, root: Path) -> SqliteSessionStore:
        """The store in ``<root>/sessions.sqlite3`` (created when missing, in the layout
        ``DSH_SQLITE_LAYOUT`` names)."""
        return SqliteSessionStore(root / DATABASE_FILE, Layout(SqliteSettings().layout))

    def list_sessions(self, root: Path) -> list[SessionHeader]:
        """Every stored session's header (none when the root holds no database)."""
        database = root / DATABASE_FILE
        if not database.is_file():
            return []
        # Read-only (mode=ro, immutable): listing a recording never writes it, nor a -wal.
        with contextlib.closing(ReadOnlySqliteStore(database)) as store:
            return store.list_sessions()

    def export_log(self, root: Path, session_id: str) -> str:
        """The session's rows as DSH JSONL text, exactly as written (an open turn stays open)."""
        database = root / DATABASE_FILE
        if not database.is_file():
            raise SessionNotFoundError(f"no session {session_id} in {root} (no {DATABASE_FILE})")
        with contextlib.closing(ReadOnlySqliteStore(database)) as store:
            log = store.load(session_id)
        return render_log(log.header, log.events)

    def discard(self, root: Path) -> None:
        """Remove a finished run's sessions folder, the database with it (none: nothing to do)."""
        shutil.rmtree(root, ignore_errors=True)


STORE_BACKEND = SqliteStoreBackend()
"""What the ``dsh.stores`` entry point ``sqlite`` names."""

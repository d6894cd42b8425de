"""The ``jsonl`` entry of the ``dsh.stores`` plugin group (see ``dsh_core.plugins``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from dsh_core import SessionHeader, SessionNotFoundError
from dsh_persistence_jsonl._store import JsonlSessionStore

__all__ = ["STORE_BACKEND", "JsonlStoreBackend"]


class JsonlStoreBackend:
    """Opens, lists and exports the one-file-per-session store under a sessions root."""

    name = "jsonl"
    settings_model = None
    embedded = True  # its data lives under the sessions root
    env_prefixes: tuple[str, ...] = ()

    def open(self, root: Path) -> JsonlSessionStore:
        """A store over ``root`` (created when missing)."""
        return JsonlSessionStore(root)

    def list_sessions(self, root: Path) -> list[SessionHeader]:
        """Every session's header under ``root`` (none when it does not exist); writes nothing."""
        if not root.is_dir():
            return []
        return JsonlSessionStore(root, sweep=False).list_sessions()

    def export_log(self, root: Path, session_id: str) -> str:
        """The session's file, exactly as written (a torn tail included)."""
        path = JsonlSessionStore(root, sweep=False).path_of(session_id) if root.is_dir() else None
        if path is None or not path.is_file():
            raise SessionNotFoundError(f"no session {session_id} in {root}")
        return path.read_text(encoding="utf-8")

    def discard(self, root: Path) -> None:
        """Remove a finished run's sessions folder, the log files with it (none: nothing to do)."""
        shutil.rmtree(root, ignore_errors=True)


STORE_BACKEND = JsonlStoreBackend()
"""What the ``dsh.stores`` entry point ``jsonl`` names."""

"""A recording root: which store holds the proxy's sessions, and reading them back as written.

A root recorded with ``--store jsonl`` is a JSONL store (one file per session); one recorded
with ``--store sqlite`` holds the SQLite store in ``sessions.db``. Only this module knows that
layout: the gate and ``dsh-snapshot show`` read a root through :func:`recorded_logs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from dsh_core import DshError, SessionLog, SessionStore, read_log_stream, read_log_text
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_persistence_sqlite import SqliteSessionStore

__all__ = ["StoreKind", "detect_store", "is_recording_root", "open_store", "recorded_logs"]

StoreKind = Literal["jsonl", "sqlite"]
SQLITE_FILE = "sessions.db"


def open_store(root: Path, kind: StoreKind) -> SessionStore:
    """The session store of a recording root (``sessions.db`` inside it for SQLite)."""
    if kind == "sqlite":
        return SqliteSessionStore(root / SQLITE_FILE)
    return JsonlSessionStore(root)


def detect_store(root: Path) -> StoreKind:
    """Which store a recording root holds (SQLite when it has ``sessions.db``)."""
    return "sqlite" if (root / SQLITE_FILE).is_file() else "jsonl"


def is_recording_root(folder: Path) -> bool:
    """Whether ``folder`` holds sessions the proxy recorded (in either store). Writes nothing.

    A root whose logs are damaged still is one: reading it (:func:`recorded_logs`) names the
    damage.
    """
    if not folder.is_dir():
        return False
    if detect_store(folder) == "sqlite":
        return True
    try:
        return bool(JsonlSessionStore(folder, sweep=False).list_sessions())
    except DshError:
        return True


def recorded_logs(root: Path) -> list[tuple[str, SessionLog]]:
    """Every session of a recording root exactly as written (an open turn stays open), each
    with the name a reader shows for it (``<id>.jsonl``, or ``sessions.db:<id>``), ordered by
    ``(createdAt, id)``. Writes nothing.

    Raises:
        DshError: a log cannot be read (``LogFormatError`` names the file and line).
    """
    if detect_store(root) == "sqlite":
        database = root / SQLITE_FILE
        with SqliteSessionStore(database) as store:
            return [
                (
                    f"{SQLITE_FILE}:{header.id}",
                    read_log_text(store.export_jsonl(header.id), f"{database}:{header.id}"),
                )
                for header in store.list_sessions()
            ]
    store = JsonlSessionStore(root, sweep=False)
    logs: list[tuple[str, SessionLog]] = []
    for header in store.list_sessions():
        path = store.path_of(header.id)
        with path.open("rb") as handle:
            logs.append((path.name, read_log_stream(handle, str(path))))
    return logs

"""A recording root: which store holds the proxy's sessions, and reading them back as written.

A root recorded with ``--store jsonl`` is a JSONL store (one file per session); one recorded
with ``--store sqlite`` holds the SQLite store in ``sessions.db``. Only this module knows that
layout: the gate and ``dsh-snapshot show`` read a root through :func:`recorded_logs`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Literal

from dsh_core import DshError, SessionLog, SessionStore, read_log_stream
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_persistence_sqlite import ReadOnlySqliteStore, SqliteSessionStore

__all__ = [
    "MAX_LOG_BYTES",
    "StoreKind",
    "detect_store",
    "is_recording_root",
    "open_store",
    "read_log_capped",
    "recorded_logs",
]

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


MAX_LOG_BYTES = 64 * 1024 * 1024
"""The largest session log (or SQLite store) read back: a reader holds ~10x a log in memory,
so a crafted 64 MiB line would cost the gate or ``show`` most of a small machine."""


def read_log_capped(path: Path, limit: int = MAX_LOG_BYTES) -> SessionLog:
    """One JSONL session log as written, never through a link, refused past ``limit`` bytes.

    Raises:
        DshError: a link, not a regular file, too large, or unreadable (naming the file).
        LogFormatError: a line is malformed (naming the file and line).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise DshError(f"{path}: cannot read the session log ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DshError(f"{path}: not a regular file")
        if info.st_size > limit:
            raise DshError(
                f"{path}: {info.st_size} bytes, larger than the {limit}-byte limit for reading "
                "a session log back; nothing was loaded"
            )
        return read_log_stream(handle, str(path))


def recorded_logs(root: Path) -> list[tuple[str, SessionLog]]:
    """Every session of a recording root exactly as written (an open turn stays open), each
    with the name a reader shows for it (``<id>.jsonl``, or ``sessions.db:<id>``), ordered by
    ``(createdAt, id)``. Writes nothing.

    Raises:
        DshError: a log cannot be read (``LogFormatError`` names the file and line).
    """
    if detect_store(root) == "sqlite":
        database = root / SQLITE_FILE
        # Read-only (mode=ro, immutable): reading a recording never writes it, nor a -wal.
        info = database.lstat()
        if stat.S_ISLNK(info.st_mode) or info.st_size > MAX_LOG_BYTES:
            raise DshError(f"{database}: a symlink or larger than {MAX_LOG_BYTES} bytes; not read")
        with contextlib.closing(ReadOnlySqliteStore(database)) as store:
            return [
                (f"{SQLITE_FILE}:{header.id}", store.load(header.id))
                for header in store.list_sessions()
            ]
    store = JsonlSessionStore(root, sweep=False)
    return [
        (store.path_of(header.id).name, read_log_capped(store.path_of(header.id)))
        for header in store.list_sessions()
    ]

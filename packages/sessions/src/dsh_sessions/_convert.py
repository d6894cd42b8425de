"""Writing the logs of a source into a new store: dsh-py's JSONL (a root or one file) or SQLite
(upstream's v4 exactly, what v4 has no column for in dsh-py's side tables; or dsh-py's former
layout 1004).

Everything is read and validated before the first byte is written, and a target that exists
is never written into: a conversion either produces the whole new store or leaves nothing.
"""

from __future__ import annotations

import contextlib
import enum
from pathlib import Path

from dsh_core import atomic_write
from dsh_persistence_jsonl import check_session_id
from dsh_persistence_sqlite import Layout, SqliteSessionStore
from dsh_sessions._sources import Source, StoredLog, iter_logs

__all__ = ["Target", "convert", "target_for"]

_SQLITE_SUFFIXES = frozenset({".sqlite3", ".sqlite", ".db"})


class Target(enum.Enum):
    """What ``convert`` writes."""

    JSONL = "jsonl"
    """dsh-py's JSONL: ``DST/<id>.jsonl`` per session, or the one file ``DST`` (``.jsonl``)."""
    SQLITE = "sqlite"
    """SQLite in upstream's schema version 4 (side tables for what v4 has no column for):
    every field kept, and upstream's v4 opens the file."""
    SQLITE_V4 = "sqlite-v4"
    """The same as ``sqlite`` (the name of the v4 target before v4 became the default)."""
    SQLITE_1004 = "sqlite-1004"
    """SQLite in dsh-py's former layout, schema version 1004."""


def target_for(dst: Path) -> Target:
    """The target a destination's name implies: an SQLite suffix, else JSONL."""
    return Target.SQLITE if dst.suffix in _SQLITE_SUFFIXES else Target.JSONL


def convert(source: Source, dst: Path, target: Target, *, expand_packed: bool = False) -> int:
    """Write every log of ``source`` to the new store ``dst``; return how many.

    Args:
        source: what :func:`~dsh_sessions.open_source` found.
        dst: a path that does not exist yet (an empty directory is accepted for JSONL).
        target: the store to write.
        expand_packed: write packed chunk rows as their ``assistant/chunk`` events (JSONL;
            SQLite rows are events, so packed rows are always expanded there).

    Raises:
        FileExistsError: ``dst`` (or a log file inside it) exists; nothing is written.
        ValueError: two logs share an id, or several logs go to one ``.jsonl`` file.
        LogFormatError / StoreVersionError / …: a source log is damaged or unreadable.
    """
    logs = read_unique(source)
    if target is Target.JSONL:
        _write_jsonl(logs, dst, expand_packed)
    else:
        _write_sqlite(logs, dst, Layout.DSH if target is Target.SQLITE_1004 else Layout.V4)
    return len(logs)


def read_unique(source: Source) -> list[StoredLog]:
    """Every log of ``source``, read and validated, refusing two logs with one id.

    Raises:
        ValueError: two logs share an id; LogFormatError / …: a damaged log.
    """
    logs = list(iter_logs(source))
    seen: dict[str, str] = {}
    for log in logs:
        session_id = log.log.header.id
        if session_id in seen:
            raise ValueError(
                f"session {session_id} is in {seen[session_id]} and in {log.where}: one store "
                f"holds one session per id"
            )
        seen[session_id] = log.where
    return logs


def _write_jsonl(logs: list[StoredLog], dst: Path, expand_packed: bool) -> None:
    if dst.suffix == ".jsonl":
        if len(logs) != 1:
            raise ValueError(
                f"{dst}: one .jsonl file holds one session, and the source has {len(logs)}; "
                f"give a directory to write a JSONL root"
            )
        files = {dst: logs[0]}
    else:
        if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
            raise FileExistsError(
                f"{dst} exists and is not an empty directory; nothing was written"
            )
        files = {dst / f"{check_session_id(log.log.header.id)}.jsonl": log for log in logs}
    for path in files:
        if path.exists():
            raise FileExistsError(f"{path} exists; nothing was written")
    (dst.parent if dst.suffix == ".jsonl" else dst).mkdir(mode=0o700, parents=True, exist_ok=True)
    for path, log in files.items():
        atomic_write(path, log.text(expand_packed=expand_packed), mode=0o600)


def _write_sqlite(logs: list[StoredLog], dst: Path, layout: Layout) -> None:
    if dst.exists():
        raise FileExistsError(f"{dst} exists; convert writes a new store; nothing was written")
    try:
        with SqliteSessionStore(dst, layout) as store:
            for log in logs:
                store.import_log(log.log)
    except BaseException:
        for leftover in (dst, Path(f"{dst}-wal"), Path(f"{dst}-shm")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        raise

"""What a store path holds, read without writing a byte.

A path is one of: an SQLite store file (or a sessions root holding ``sessions.sqlite3``),
read through :class:`~dsh_persistence_sqlite.ReadOnlySqliteStore` (upstream's June v3, v4,
dsh-py's 1004); a JSONL session log; or a JSONL root, in dsh-py's layout (``<root>/<id>.jsonl``)
or upstream's (``<root>/cwd-<sha256(cwd)[:12]>/<id>.jsonl`` and ``<root>/_no-cwd/<id>.jsonl``,
the June-to-HEAD ``sessionDir``).

A JSONL log is kept as its rows, the JSON objects of its lines with their key order, packed
chunk rows packed, and absent ``seq`` / ``time`` absent: writing them back gives the bytes
upstream wrote. It is validated by :func:`dsh_core.read_log_text` all the same, so a damaged
log is an error naming its line.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_core import PACKED_ROW_TYPES, LogFormatError, SessionLog, dumps_json, read_log_text
from dsh_persistence_sqlite import ReadOnlySqliteStore

__all__ = [
    "SQLITE_ROOT_FILE",
    "Entry",
    "Source",
    "StoredLog",
    "iter_logs",
    "open_source",
    "read_jsonl",
]

_SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_ROOT_FILE = "sessions.sqlite3"  # the sqlite backend's file in a sessions root


@dataclass(frozen=True, slots=True)
class StoredLog:
    """One session as its source holds it.

    Attributes:
        where: the file (JSONL) or ``<database>#<id>`` (SQLite).
        rows: the header object, then one object per stored row (packed rows packed).
        log: the same log as core reads it (packed rows expanded, ``seq`` / ``time`` filled).
    """

    where: str
    rows: list[dict[str, Any]]
    log: SessionLog

    def text(self, *, expand_packed: bool = False) -> str:
        """The log as JSONL: each row as compact JSON (``JSON.stringify``'s text), packed rows
        kept unless ``expand_packed``, where each becomes its ``assistant/chunk`` events."""
        rows = self.rows if not expand_packed else self._expanded()
        return "".join(dumps_json(row) + "\n" for row in rows)

    def _expanded(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [self.rows[0]]
        events = self.log.events
        index = 0
        for row in self.rows[1:]:
            if row.get("type") in PACKED_ROW_TYPES:
                members = len(row["data"]["dt"]) + 1
                out.extend(event.to_json() for event in events[index : index + members])
                index += members
            else:
                out.append(row)
                index += 1
        return out


@dataclass(frozen=True, slots=True)
class Entry:
    """One session's place in a source; :attr:`load` reads it (raising a ``DshError``)."""

    where: str
    load: Callable[[], StoredLog]


@dataclass(frozen=True, slots=True)
class Source:
    """A store path and what it holds."""

    path: Path
    kind: str
    """``sqlite v3`` / ``sqlite v4`` / ``sqlite v1004``, ``jsonl file``, ``jsonl root``."""
    entries: list[Entry]


def read_jsonl(path: Path) -> StoredLog:
    """One JSONL log, validated by core's reader, its rows kept as written.

    Raises:
        LogFormatError: naming the file and line (not UTF-8, bad JSON, a bad field…).
    """
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LogFormatError(str(path), None, None, f"not UTF-8 text ({exc})") from None
    log = read_log_text(text, str(path))
    rows: list[dict[str, Any]] = [json.loads(line) for line in text.split("\n") if line.strip()]
    return StoredLog(str(path), rows, log)


def _jsonl_logs(root: Path) -> list[Path]:
    found = [*root.glob("*.jsonl"), *root.glob("cwd-*/*.jsonl"), *root.glob("_no-cwd/*.jsonl")]
    return sorted(p for p in found if not p.name.startswith(".") and p.is_file())


def _sqlite_entries(database: Path) -> tuple[str, list[Entry]]:
    with contextlib.closing(ReadOnlySqliteStore(database)) as store:
        version = store.version
        headers = store.list_sessions()

    def loader(session_id: str) -> Callable[[], StoredLog]:
        def load() -> StoredLog:
            with contextlib.closing(ReadOnlySqliteStore(database)) as store:
                log = store.load(session_id)
            rows = [log.header.to_json(), *(event.to_json() for event in log.events)]
            return StoredLog(f"{database}#{session_id}", rows, log)

        return load

    return f"sqlite v{version}", [
        Entry(f"{database}#{header.id}", loader(header.id)) for header in headers
    ]


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC


def open_source(path: Path) -> Source:
    """Recognise ``path`` and list its sessions, without writing.

    Raises:
        FileNotFoundError: nothing at ``path``.
        StoreVersionError / StoreCorruptError: an SQLite file this code does not read.
    """
    if path.is_file():
        if _is_sqlite(path):
            kind, entries = _sqlite_entries(path)
            return Source(path, kind, entries)
        return Source(path, "jsonl file", [Entry(str(path), lambda: read_jsonl(path))])
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such store (neither a file nor a directory)")
    logs = _jsonl_logs(path)
    database = path / SQLITE_ROOT_FILE
    if not logs and database.is_file():
        kind, entries = _sqlite_entries(database)
        return Source(database, kind, entries)
    return Source(path, "jsonl root", [Entry(str(log), _bind(log)) for log in logs])


def _bind(path: Path) -> Callable[[], StoredLog]:
    return lambda: read_jsonl(path)


def iter_logs(source: Source) -> Iterator[StoredLog]:
    """Every log of ``source``, in its order (the first damaged one raises)."""
    for entry in source.entries:
        yield entry.load()

"""``JsonlSessionStore``: one JSONL file per session (DESIGN §5).

Layout under the root directory:

- ``<id>.jsonl`` — the log: the header line, then one event per line;
- ``.<id>.lock`` — the writer lock (``flock``; the kernel drops it when its process dies),
  present only while a writer holds it or after a writer was killed;
- ``.<id>.jsonl.<random>.tmp`` — a first write in progress (``dsh_core.atomic_write``).

Opening a store sweeps what killed writers left behind: every temporary file and lock file
whose lock nobody holds.

Durability: the header and the seed are written to a temporary file, fsynced, renamed over
the final name and the directory fsynced, so a session exists whole or not at all. Each later
batch is one ``write`` of whole lines and one ``fsync``. A crash can therefore only leave a
torn *tail*: a final segment without its newline, or a final line that does not parse. Load
cuts it away in its view and closes the open turn with synthetic events; resume truncates it
and appends those closers durably. Any other damage is an error naming the file, line and
field, and the file is left as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from dsh_core import (
    CreateOptions,
    Event,
    LogFormatError,
    Session,
    SessionExistsError,
    SessionHeader,
    SessionIdError,
    SessionLog,
    SessionNotFoundError,
    StoreAccessError,
    StoreCorruptError,
    WriterLock,
    atomic_write,
    check_batch,
    close_open_turn,
    dumps_event_lines,
    dumps_header,
    prepare_header,
    read_log_bytes,
    read_log_stream,
)

__all__ = ["JsonlSessionStore"]

SUFFIX = ".jsonl"
# Ids become file names: no path separators, control characters or spaces, and never a
# leading dot (the lock and temporary files are dot files, and "." / ".." are directories).
_SAFE_ID = re.compile(r"[^/\\\x00-\x20\x7f.][^/\\\x00-\x20\x7f]{0,199}")
# What killed writers leave: ``.<id>.jsonl.<hex>.tmp`` (``.<id>.<hex>.tmp`` before
# atomic_write took over) and ``.<id>.lock``.
_LEFTOVER = re.compile(r"\.(?P<id>.+?)(?:(?:\.jsonl)?\.[0-9a-f]+\.tmp|\.lock)")


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` if it can name a file under the root.

    Raises:
        SessionIdError: (a ``ValueError``) the id is empty, longer than 200 characters, starts
            with a dot, or holds a path separator, a space or a control character.
    """
    if not isinstance(session_id, str) or not _SAFE_ID.fullmatch(session_id):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise SessionIdError(
            f"field 'id': session id {session_id!r} cannot be stored as a file: use 1-200 "
            f"characters without '/', '\\', spaces or control characters, not starting with a dot"
        )
    return session_id


@dataclass(slots=True)
class _Scan:
    """A log file read for loading or resuming."""

    log: SessionLog
    size: int
    """Bytes of the file that hold whole, valid lines (the rest is a torn tail)."""
    torn: int
    """Bytes of torn tail after ``size`` (0 when the file ends cleanly)."""


def _torn_tail_start(data: bytes) -> int:
    """Where a torn tail begins (``len(data)`` when there is none).

    The header line is never a torn tail: it is published whole with the first batch.
    """
    end = len(data)
    if not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        return cut if cut > 0 else end
    start = data.rfind(b"\n", 0, end - 1) + 1
    if start == 0:
        return end
    line = data[start : end - 1]
    if not line.strip():
        return end
    try:
        json.loads(line.decode("utf-8"))
    except ValueError:  # covers UnicodeDecodeError and JSONDecodeError
        return start
    return end


def _uncommitted_damage_start(data: bytes, error: LogFormatError) -> int | None:
    """Where the line ``error`` names begins, if no ``turn/end`` follows it (so it lies in the
    uncommitted tail of an interrupted turn); ``None`` when it is committed damage."""
    if error.line is None or error.line <= 1:
        return None  # the header is published whole; damage there is never a crash tail
    lines = data.split(b"\n")
    if error.line > len(lines):
        return None
    for raw in lines[error.line - 1 :]:
        try:
            value = json.loads(raw.decode("utf-8"))
        except ValueError:
            continue
        if isinstance(value, dict) and cast(dict[str, Any], value).get("type") == "turn/end":
            return None
    return sum(len(line) + 1 for line in lines[: error.line - 1])


def _torn_tail_start_file(f: BinaryIO, size: int) -> int:
    """:func:`_torn_tail_start` of the file's first ``size`` bytes, reading only its last line.

    Raises:
        _ShortRead: the file is shorter than ``size``.
    """
    # The rule only looks at the last newline before the final byte and what follows it.
    # Applied to that segment (starting with the newline, so it is never a one-line log) it
    # gives the same cut, shifted by the segment's start.
    block = 1 << 16
    parts: list[bytes] = []
    stop = size
    while stop > 0:
        start = max(0, stop - block)
        f.seek(start)
        part = f.read(stop - start)
        if len(part) != stop - start:
            raise _ShortRead
        parts.append(part)
        found = part.rfind(b"\n", 0, len(part) - 1 if stop == size else len(part))
        if found >= 0:
            parts.reverse()
            segment = b"".join(parts)[found:]
            return start + found + _torn_tail_start(segment)
        stop = start
    return size  # no newline before the final byte: a one-line log is never a torn tail


class _ShortRead(Exception):
    """The file shrank while it was read (a writer rolled back a failed batch)."""


def _lines_upto(f: BinaryIO, end: int) -> Iterator[bytes]:
    """The file's lines from its current position up to byte ``end`` (a line boundary)."""
    remaining = end
    while remaining > 0:
        raw = f.readline(remaining)
        if not raw:
            raise _ShortRead
        remaining -= len(raw)
        yield raw


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _JsonlWriter:
    """Appends batches to one log file, each as one write and one fsync."""

    def __init__(
        self, path: Path, lock: WriterLock, session_id: str, size: int, next_seq: int
    ) -> None:
        self._path = path
        self._lock = lock
        self._id = session_id
        self._where = f"session {session_id} ({path})"  # how a refused batch names the log
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        self._size = size
        self._next = next_seq

    def append(self, events: Sequence[Event]) -> None:
        if self._fd is None:
            raise ValueError(f"session {self._id}: the writer is closed")
        if not events:
            return
        self._check_file()
        check_batch(self._where, events, self._next)
        data = dumps_event_lines(events)
        try:
            _write_all(self._fd, data)
            os.fsync(self._fd)
        except OSError:
            # leave no half batch behind for the next writer to mistake for a torn tail
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
                os.fsync(self._fd)
            raise
        self._size += len(data)
        self._next += len(events)

    def _check_file(self) -> None:
        """Make sure the file is still the one this writer appended to, at the size it left."""
        assert self._fd is not None
        st = os.fstat(self._fd)
        try:
            on_disk = os.stat(self._path)
        except FileNotFoundError:
            raise StoreCorruptError(
                f"session {self._id}: {self._path} was removed while open for writing"
            ) from None
        if (on_disk.st_ino, on_disk.st_dev) != (st.st_ino, st.st_dev):
            raise StoreCorruptError(
                f"session {self._id}: {self._path} was replaced while open for writing"
            )
        if st.st_size != self._size:
            # someone wrote around the lock: trust the file, not memory
            data = Path(self._path).read_bytes()
            cut = _torn_tail_start(data)
            if cut != len(data):
                raise StoreCorruptError(
                    f"session {self._id}: {self._path} changed under its writer and now ends "
                    f"in a partial line at byte {cut}"
                )
            self._next = len(read_log_bytes(data, str(self._path)).events)
            self._size = len(data)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            finally:
                self._lock.release()


class JsonlSessionStore:
    """Session logs as JSONL files under ``root`` (created if missing).

    Several store instances, in one process or many, may share a root: a session has at most
    one writer at a time (the others get :class:`~dsh_core.SessionBusyError`), and readers
    never block or write.
    """

    def __init__(self, root: Path | str, *, sweep: bool = True) -> None:
        """Open (and create) the root; ``sweep=False`` leaves killed writers' leftovers for a
        reader that must write nothing (``dsh.stores`` listing and export)."""
        self.root = Path(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise StoreAccessError(str(self.root), "the store root is not a directory") from None
        if sweep:
            self._sweep()

    def _sweep(self) -> None:
        """Remove temporary and lock files left by killed writers (never a live writer's)."""
        for entry in self.root.iterdir():
            match = _LEFTOVER.fullmatch(entry.name)
            if match is None or not entry.is_file() or entry.is_symlink():
                continue
            lock_path = self.root / f".{match['id']}.lock"
            if entry != lock_path and not lock_path.exists():
                entry.unlink(missing_ok=True)  # no writer: its create died before publishing
                continue
            with contextlib.suppress(OSError):
                lock = WriterLock.try_acquire(lock_path)
                if lock is not None:  # nobody holds it: whatever it guarded is abandoned
                    if entry != lock_path:
                        entry.unlink(missing_ok=True)
                    lock.release()

    # --- paths ---------------------------------------------------------------------------------

    def path_of(self, session_id: str) -> Path:
        """The log file of ``session_id`` (which need not exist)."""
        try:
            return self.root / f"{check_session_id(session_id)}{SUFFIX}"
        except SessionIdError as exc:
            raise SessionIdError(f"{self.root}: {exc}") from None

    def _lock(self, session_id: str) -> WriterLock:
        path = self.path_of(session_id)
        return WriterLock.acquire(self.root / f".{session_id}.lock", session_id, path)

    # --- SessionStore --------------------------------------------------------------------------

    def create(self, options: CreateOptions) -> Session:
        """Write the header and the seed as one atomically published file.

        Raises:
            SessionExistsError: a log with that id exists (it is left untouched).
            SessionBusyError: another writer is creating or writing that id.
            ValueError: the id cannot be a file name.
        """
        header = prepare_header(options)
        path = self.path_of(header.id)
        if path.exists():
            raise SessionExistsError(f"session {header.id} already exists ({path})")
        lock = self._lock(header.id)
        try:
            if path.exists():
                raise SessionExistsError(f"session {header.id} already exists ({path})")
            seed = [event.with_seq(index) for index, event in enumerate(options.seed)]
            data = (dumps_header(header) + "\n").encode("utf-8") + dumps_event_lines(seed)
            atomic_write(path, data, mode=0o600)  # 0600: a log holds a conversation
            writer = _JsonlWriter(path, lock, header.id, len(data), len(seed))
        except BaseException:
            lock.release()
            raise
        return Session(header, seed, writer)

    def resume(self, session_id: str) -> Session:
        """Open a session for writing, repairing a torn tail and closing an open turn.

        Raises:
            SessionNotFoundError: no such session.
            SessionBusyError: another writer holds it.
            LogFormatError: the log is damaged before its tail (the file is untouched).
        """
        path = self._existing(session_id)
        lock = self._lock(session_id)
        try:
            scan = self._scan(path, session_id)
            events = list(scan.log.events)
            if scan.torn:
                fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.ftruncate(fd, scan.size)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            writer = _JsonlWriter(path, lock, session_id, scan.size, len(events))
        except BaseException:
            lock.release()
            raise
        try:
            closers = close_open_turn(events)
            if closers:
                writer.append(closers)
                events.extend(closers)
        except BaseException:
            writer.close()
            raise
        return Session(scan.log.header, events, writer)

    def load(self, session_id: str) -> SessionLog:
        """Read a session; a torn tail is cut and an open turn closed, in the view only.

        Raises:
            SessionNotFoundError: no such session.
            LogFormatError: the log is damaged before its tail.
        """
        scan = self._scan(self._existing(session_id), session_id)
        events = scan.log.events  # a fresh list, nobody else's: extend it in place
        events.extend(close_open_turn(events))
        return SessionLog(scan.log.header, events)

    def list_sessions(self) -> list[SessionHeader]:
        """Headers of every session under the root, ordered by ``(createdAt, id)``.

        Raises:
            LogFormatError: a log's header is damaged (naming the file).
        """
        headers: list[SessionHeader] = []
        for path in self.root.iterdir():
            name = path.name
            if name.startswith(".") or not name.endswith(SUFFIX) or not path.is_file():
                continue
            headers.append(self._read_header(path, name[: -len(SUFFIX)]))
        headers.sort(key=lambda h: (h.created_at, h.id))
        return headers

    def close(self) -> None:
        """Nothing to release: each session's writer holds its own file and lock."""

    # --- reading -------------------------------------------------------------------------------

    def _existing(self, session_id: str) -> Path:
        path = self.path_of(session_id)
        if not path.is_file():
            raise SessionNotFoundError(f"no session {session_id} in {self.root} (no {path.name})")
        return path

    def _scan(self, path: Path, session_id: str) -> _Scan:
        try:
            f = path.open("rb")
        except FileNotFoundError:
            raise SessionNotFoundError(f"no session {session_id} in {self.root}") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            try:
                # Stream the lines: the log is never held whole, as bytes or as text.
                cut = _torn_tail_start_file(f, size)
                f.seek(0)
                log = read_log_stream(_lines_upto(f, cut), str(path))
            except (LogFormatError, _ShortRead):
                # Damage (or a file that shrank while read) takes the whole-file reader, so
                # the error named is the one it names (it checks all UTF-8 before any JSON).
                f.seek(0)
                data = f.read()
                cut, size = _torn_tail_start(data), len(data)
                try:
                    log = read_log_bytes(data[:cut], str(path))
                except LogFormatError as error:
                    # Damage after the last committed turn/end is a crash tail (upstream's
                    # scanLog): cut there. Damage before it is corruption.
                    tail = _uncommitted_damage_start(data[:cut], error)
                    if tail is None:
                        raise
                    cut = tail
                    log = read_log_bytes(data[:cut], str(path))
        self._check_id(log.header, session_id, path)
        return _Scan(log, cut, size - cut)

    def _read_header(self, path: Path, session_id: str) -> SessionHeader:
        blank = 0
        first: bytes | None = None
        with path.open("rb") as f:
            for raw in f:
                if raw.strip():
                    first = raw
                    break
                blank += 1
        if first is None:
            raise LogFormatError(str(path), 1, None, "the log is empty: no session header")
        # the blank lines keep the reader's line numbers those of the file
        header = read_log_bytes(b"\n" * blank + first, str(path)).header
        self._check_id(header, session_id, path)
        return header

    @staticmethod
    def _check_id(header: SessionHeader, session_id: str, path: Path) -> None:
        if header.id != session_id:
            raise LogFormatError(
                str(path),
                1,
                "id",
                f"the header names session {header.id!r} but the file is named for {session_id!r}",
            )

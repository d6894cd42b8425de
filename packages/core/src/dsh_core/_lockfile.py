"""The writer lock both file stores share: an ``flock`` on a file that exists only while held."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from dsh_core._errors import SessionBusyError, StoreAccessError

__all__ = ["WriterLock"]

_BUSY = frozenset({errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES})


class WriterLock:
    """An exclusive, non-blocking ``flock`` on ``path``, removed again on :meth:`release`.

    ``flock`` locks belong to the open file description, so two stores in one process exclude
    each other just as two processes do, and the kernel drops the lock when its holder dies
    (the file then stays behind until the next holder releases it).

    Removing the file on release would let a waiter lock an unlinked inode while a newcomer
    locks a fresh file of the same name; so a lock only counts once the name still points at
    the inode that was locked, and otherwise the attempt starts over.

    Stores take a session's lock with :meth:`acquire`, which words failures as store errors;
    :meth:`try_acquire` is the bare attempt. The constructor is private.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def try_acquire(cls, path: Path) -> WriterLock | None:
        """The lock on ``path`` (created if missing), or ``None`` when someone else holds it.

        Raises:
            OSError: the lock file cannot be created or opened (a directory in the way, a
                read-only folder).
        """
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in _BUSY:
                    return None
                raise
            try:
                named = os.stat(path)
            except FileNotFoundError:
                named = None
            held = os.fstat(fd)
            if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
                return cls(path, fd)
            os.close(fd)  # the holder released (and removed) it meanwhile: try again

    @classmethod
    def acquire(cls, path: Path, session_id: str, where: Path | str) -> WriterLock:
        """The writer lock of ``session_id`` at ``path``, for a store whose data is ``where``.

        Raises:
            StoreAccessError: the lock file cannot be created or opened (naming it).
            SessionBusyError: another writer, in this or another process, holds it.
        """
        try:
            lock = cls.try_acquire(path)
        except OSError as exc:
            raise StoreAccessError(
                str(path), f"cannot open the writer lock: {exc.strerror}"
            ) from None
        if lock is None:
            raise SessionBusyError(
                f"session {session_id} ({where}) is already open for writing by another "
                f"writer (lock {path} is held); close that session first"
            )
        return lock

    @property
    def held(self) -> bool:
        """Whether this lock is still held."""
        return self._fd is not None

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            # Unlink while still holding the lock: a newcomer then makes a fresh file.
            self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)

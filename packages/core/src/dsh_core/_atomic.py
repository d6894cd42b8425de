"""One atomic file write for every package: temp file, fsync, rename, directory fsync."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: Path | str, data: str | bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old bytes or the new, never half.

    The data goes to a hidden temporary file in the same directory
    (``.<name>.<32 hex digits>.tmp``, created exclusively with ``mode``, less the umask), is
    fsynced, renamed over ``path`` (``os.replace``: a symlink at ``path`` is replaced, never
    followed) and the directory is fsynced so the rename survives a crash. Text is written as
    UTF-8 with the newlines given. On any failure the temporary file is removed and ``path``
    is untouched; a process killed midway leaves only that temporary file behind.

    Raises:
        OSError: the directory cannot be written.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as handle:  # closes fd, even when the write fails
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)

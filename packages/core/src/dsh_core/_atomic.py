"""One atomic file write for every package: temp file, fsync, rename, directory fsync."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: Path | str, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old bytes or the new, never half.

    The data goes to a hidden temporary file in the same directory, is fsynced, renamed over
    ``path`` (``os.replace``: a symlink at ``path`` is replaced, never followed) and the
    directory is fsynced so the rename survives a crash. Text is written as UTF-8 with the
    newlines given. On any failure the temporary file is removed and ``path`` is untouched.

    Raises:
        OSError: the directory cannot be written.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
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

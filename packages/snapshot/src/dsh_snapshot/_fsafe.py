"""The one confined open: every read and write of a scenario file goes through here.

A scenario folder comes from a pull request, so any entry in it (and any directory on the way
to it: ``build/``, ``.pending/``) may be a symlink planted to make a write land outside, or a
read print an outside file. Checking a path and then opening it races with whoever swaps the
link in between; here nothing is checked and then opened. Each path is walked from a directory
file descriptor one component at a time, every component opened with ``O_NOFOLLOW`` relative
to its parent's descriptor (``dir_fd=``, ``openat``): a symlink anywhere below the base is an
error (``ELOOP``/``ENOTDIR``), never followed, whenever it appears. Writes create a temporary
file with ``O_EXCL`` in the same directory descriptor and rename it over the target there, so
a link at the target is replaced, never written through. ``..`` and absolute parts are refused
before anything is opened.

The base itself is opened as given (it is the user's: a scenario the user named on the
command line, the current directory for a report path).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Generator
from pathlib import Path, PurePosixPath

from dsh_core import DshError

__all__ = [
    "ConfinedPathError",
    "confined_dir",
    "make_dirs",
    "read_bytes",
    "read_file",
    "read_file_text",
    "read_text",
    "remove_file",
    "split_confined",
    "write_bytes",
    "write_user_file",
]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
DEFAULT_LIMIT = 64 * 1024 * 1024


class ConfinedPathError(DshError):
    """A path would leave its base (a symlink, ``..``, an absolute part) or is not a regular
    file; the message names the path and why."""


def _parts(rel: str | PurePosixPath) -> list[str]:
    text = str(rel)
    parts = [p for p in PurePosixPath(text).parts if p not in ("", ".")]
    if text.startswith("/") or any(p == ".." for p in parts) or not parts:
        raise ConfinedPathError(f"{text!r}: must be a relative path that stays inside its folder")
    return parts


def _problem(base: Path, rel: str, exc: OSError) -> ConfinedPathError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        why = "a symlink (or not a directory) on the way: it is never followed"
    else:
        why = exc.strerror or str(exc)
    return ConfinedPathError(f"{base / rel}: {why}")


@contextlib.contextmanager
def confined_dir(
    base: Path, rel: str | PurePosixPath = ".", *, create: bool = False
) -> Generator[int]:
    """A descriptor of ``base/rel`` reached without following any link below ``base``.

    Args:
        create: make missing directories on the way (mode 0o755, never through a link).
    """
    fd = _walk(base, rel, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def _walk(base: Path, rel: str | PurePosixPath, *, create: bool) -> int:
    parts = [] if str(rel) in ("", ".") else _parts(rel)
    fd = -1
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for part in parts:
            try:
                nxt = os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except FileNotFoundError:
        if fd >= 0:
            os.close(fd)
        raise
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        raise _problem(base, str(rel), exc) from None
    return fd


def split_confined(rel: str | PurePosixPath) -> tuple[str, str]:
    """``(directory part, file name)`` of a confined relative path."""
    parts = _parts(rel)
    return "/".join(parts[:-1]) or ".", parts[-1]


def read_bytes(base: Path, rel: str | PurePosixPath, limit: int = DEFAULT_LIMIT) -> bytes:
    """The bytes of the regular file ``base/rel`` (no link followed, at most ``limit`` bytes).

    Raises:
        FileNotFoundError: it does not exist.
        ConfinedPathError: a link on the way, not a regular file, or larger than ``limit``.
    """
    directory, name = split_confined(rel)
    with confined_dir(base, directory) as dir_fd:
        try:
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd
            )
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _problem(base, str(rel), exc) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfinedPathError(f"{base / rel}: not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ConfinedPathError(f"{base / rel}: larger than {limit} bytes, refused")
    return data


def read_file(path: Path, limit: int = DEFAULT_LIMIT) -> bytes:
    """:func:`read_bytes` of a scenario file named by its path (no link as its last part, a
    regular file only: a FIFO never blocks the gate, at most ``limit`` bytes)."""
    return read_bytes(path.parent, path.name, limit)


def read_file_text(path: Path, limit: int = DEFAULT_LIMIT) -> str:
    """:func:`read_file` decoded as UTF-8 (``UnicodeDecodeError`` is a ``ValueError``)."""
    return read_file(path, limit).decode("utf-8")


def read_text(base: Path, rel: str | PurePosixPath, limit: int = DEFAULT_LIMIT) -> str:
    """:func:`read_bytes` decoded as UTF-8 (``UnicodeDecodeError`` is a ``ValueError``)."""
    return read_bytes(base, rel, limit).decode("utf-8")


def write_bytes(base: Path, rel: str | PurePosixPath, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``base/rel`` atomically: a fresh temp file in the same directory, fsynced, renamed
    over the target there (a link at the target is replaced, never written through). Missing
    directories on the way are created, never through a link."""
    directory, name = split_confined(rel)
    with confined_dir(base, directory, create=True) as dir_fd:
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                mode,
                dir_fd=dir_fd,
            )
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
            with contextlib.suppress(OSError):
                os.fsync(dir_fd)
        except OSError as exc:
            raise _problem(base, str(rel), exc) from None


def make_dirs(base: Path, rel: str | PurePosixPath) -> None:
    """Create ``base/rel`` and its parents, never through a link."""
    with confined_dir(base, rel, create=True):
        pass


def remove_file(base: Path, rel: str | PurePosixPath) -> None:
    """Remove the entry ``base/rel`` (a link is removed, not its target); absent is fine."""
    directory, name = split_confined(rel)
    try:
        with confined_dir(base, directory) as dir_fd, contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
    except (ConfinedPathError, FileNotFoundError):
        return


def write_user_file(path: Path, data: bytes) -> None:
    """Write an output the user named (``--html-report``, ``show --html``) without following a
    link the checkout holds: below the current directory every component is confined (a
    committed ``build -> ~/.ssh`` is refused); elsewhere the parent the user named is taken
    as given and only the file itself is never written through.

    Raises:
        ConfinedPathError: a link on the way, or the target cannot be written.
    """
    cwd = Path.cwd()
    absolute = path if path.is_absolute() else cwd / path
    try:
        rel = absolute.relative_to(cwd)
    except ValueError:
        absolute.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(absolute.parent, absolute.name, data)
        return
    write_bytes(cwd, rel.as_posix(), data)

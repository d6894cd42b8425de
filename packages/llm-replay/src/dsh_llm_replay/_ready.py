"""``readyFile``: the marker a hang entry drops, confined to the run's working directory.

An override document arrives with a scenario, so the path it names is untrusted: it must be a
relative path that stays inside the directory the agent runs in. The marker is created, never
truncated, through directory descriptors only (no link followed, on the way or in its place,
whenever one appears), so no scenario can empty or create a file outside its run.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath, PureWindowsPath

from dsh_llm_replay._errors import ReplayError

__all__ = ["ready_file_problem", "touch_marker"]


def ready_file_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable ``readyFile``, or ``None`` when it is.

    Acceptable: a relative path with no ``..`` part, no NUL, no drive or home prefix.
    """
    if "\x00" in value:
        return "readyFile must not contain a NUL character"
    posix, windows = PurePosixPath(value), PureWindowsPath(value)
    if posix.is_absolute() or windows.drive or windows.root or value.startswith("~"):
        return (
            f"readyFile {value!r} is absolute; it must be a path relative to the run's "
            "working directory"
        )
    if ".." in posix.parts or ".." in windows.parts:
        return f"readyFile {value!r} climbs out with '..'; it must stay inside the run directory"
    return None


def touch_marker(ready_file: str, root: Path | None = None) -> None:
    """Create the (empty) marker ``ready_file`` under ``root`` (default: the process cwd).

    Nothing is checked and then opened: the path is walked from a descriptor of ``root`` one
    directory at a time, each opened ``O_NOFOLLOW`` relative to its parent (``openat``), and
    the marker is created there with ``O_CREAT | O_EXCL | O_NOFOLLOW``. A directory on the way
    swapped for a link at any moment (a command of the same run may do it while the agent
    waits) is an error, never followed; an existing regular file keeps its bytes; a link or
    anything else at the marker's place is refused.

    Raises:
        ReplayError: the path is not acceptable or the marker cannot be created.
    """
    problem = ready_file_problem(ready_file)
    if problem is not None:
        raise ReplayError(f"replay hang entry: {problem}")
    *folders, name = [part for part in PurePosixPath(ready_file).parts if part != "."]
    try:
        directory = os.open(root or Path.cwd(), _DIRECTORY)
    except OSError as exc:
        raise _cannot(ready_file, exc) from None
    try:
        for folder in folders:
            try:
                inner = os.open(folder, _DIRECTORY | os.O_NOFOLLOW, dir_fd=directory)
            except OSError as exc:
                raise _cannot(ready_file, exc) from None
            os.close(directory)
            directory = inner
        _create(ready_file, name, directory)
    finally:
        os.close(directory)


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _create(ready_file: str, name: str, directory: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.close(os.open(name, flags, 0o644, dir_fd=directory))
    except FileExistsError:
        # Already there (a second hang entry, a file the workspace has): fine if it is a plain
        # file, which is left as it is; a link or anything else is not ours to touch.
        found = os.stat(name, dir_fd=directory, follow_symlinks=False)
        if not stat.S_ISREG(found.st_mode):
            raise ReplayError(
                f"replay hang entry: cannot create readyFile {ready_file!r} (something other "
                "than a regular file is in its place; a link is never followed)"
            ) from None
    except OSError as exc:
        raise _cannot(ready_file, exc) from None


def _cannot(ready_file: str, exc: OSError) -> ReplayError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        why = "a link (or not a directory) on the way; it is never followed"
    else:
        why = exc.strerror or str(exc)
    return ReplayError(f"replay hang entry: cannot create readyFile {ready_file!r} ({why})")

"""``readyFile``: the marker a hang entry drops, confined to the run's working directory.

An override document arrives with a scenario, so the path it names is untrusted: it must be a
relative path that stays inside the directory the agent runs in. The marker is created, never
truncated, and a symlink in its place is never followed, so no scenario can empty or create a
file outside its run.
"""

from __future__ import annotations

import os
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

    An existing file keeps its bytes; a symlink at the marker's place is refused, and so is a
    marker whose directory resolves outside ``root``.

    Raises:
        ReplayError: the path is not acceptable or the marker cannot be created.
    """
    problem = ready_file_problem(ready_file)
    if problem is not None:
        raise ReplayError(f"replay hang entry: {problem}")
    base = (root or Path.cwd()).resolve()
    target = base / ready_file
    parent = target.parent.resolve()
    if parent != base and base not in parent.parents:
        raise ReplayError(
            f"replay hang entry: readyFile {ready_file!r} resolves to {parent}, outside the run "
            f"directory {base}"
        )
    try:
        fd = os.open(parent / target.name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise ReplayError(
            f"replay hang entry: cannot create readyFile {ready_file!r} ({exc.strerror})"
        ) from None
    os.close(fd)

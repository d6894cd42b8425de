"""A recording root: which store holds the proxy's sessions, and reading them back as written.

The proxy keeps a recording in any installed store backend (``dsh.stores``, see
``dsh_core.plugins``), chosen by name (``--store``), in that backend's own layout under the
root. The name goes into a one-line marker file, :data:`STORE_MARKER`, so that a replay, the
gate and ``dsh-snapshot show`` read the root back through the same backend; a root without the
marker is read with the default backend (JSONL), as roots recorded before the marker were.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from dsh_core import DshError, SessionLog, SessionStore, read_log_stream, read_log_text
from dsh_core.plugins import DEFAULT_STORE_BACKEND, PluginError, store_backend

__all__ = [
    "MAX_LOG_BYTES",
    "STORE_MARKER",
    "detect_store",
    "is_recording_root",
    "open_recording_root",
    "read_log_capped",
    "recorded_logs",
]

STORE_MARKER = ".dsh-proxy-store"
"""The file in a recording root that names its store backend (one line: ``sqlite``)."""


def open_recording_root(root: Path, store: str) -> SessionStore:
    """The session store of a recording root (not ``dsh_core.plugins.open_store``, which opens a
    sessions root with no marker), through the ``dsh.stores`` backend named
    ``store``; the root (created when missing) records the name for its readers.

    Raises:
        dsh_core.plugins.PluginError: no installed backend has that name.
        DshError: the root already names another backend.
    """
    backend = store_backend(store)
    root.mkdir(parents=True, exist_ok=True)
    marker = root / STORE_MARKER
    if marker.is_file():
        recorded = detect_store(root, store)
        if recorded != store:
            raise DshError(
                f"{root} holds a recording in store {recorded!r} ({marker}); "
                f"it cannot be opened as {store!r}"
            )
    else:
        marker.write_text(store + "\n", encoding="utf-8")
    return backend.open(root)


def detect_store(root: Path, chosen: str | None = None) -> str:
    """The store backend a recording root names (the default, JSONL, when it names none).

    The marker is a file of the recording, which may come with a pull request: it may name
    an embedded store (files under the root), never a server one (PostgreSQL…), which would
    make ``show`` or a replay connect to the user's database. A server store is read only when
    the user chose it: ``chosen`` (the caller's ``--store``) or ``DSH_STORE``.

    Raises:
        DshError: the marker is empty, or names a server store the user did not choose.
    """
    marker = root / STORE_MARKER
    if not marker.is_file():
        return DEFAULT_STORE_BACKEND
    name = marker.read_text(encoding="utf-8").strip()
    if not name:
        raise DshError(f"{marker}: empty; it should name the root's store backend")
    if name in (chosen, os.environ.get("DSH_STORE")):
        return name
    try:
        embedded = store_backend(name).embedded
    except PluginError:
        return name  # not installed: opening it names the missing backend
    if not embedded:
        raise DshError(
            f"{marker}: names the server store {name!r}; a recording never chooses a server "
            f"store to connect to (set DSH_STORE={name} to read it from there)"
        )
    return name


def is_recording_root(folder: Path) -> bool:
    """Whether ``folder`` holds sessions the proxy recorded (in any store). Writes nothing.

    A root whose logs are damaged still is one: reading it (:func:`recorded_logs`) names the
    damage.
    """
    if not folder.is_dir():
        return False
    if (folder / STORE_MARKER).is_file():
        return True
    try:
        return bool(store_backend(DEFAULT_STORE_BACKEND).list_sessions(folder))
    except DshError:
        return True


MAX_LOG_BYTES = 64 * 1024 * 1024
"""The largest session log (or store file) read back: a reader holds ~10x a log in memory,
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


def _check_root(root: Path) -> None:
    """Refuse a root holding a link or a file past ``MAX_LOG_BYTES`` before any store reads it."""
    for entry in os.scandir(root):
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise DshError(f"{entry.path}: a symlink in a recording root; never followed")
        if info.st_size > MAX_LOG_BYTES:
            raise DshError(
                f"{entry.path}: {info.st_size} bytes, larger than the {MAX_LOG_BYTES}-byte "
                "limit for reading a recording back; nothing was loaded"
            )


def recorded_logs(root: Path, store: str | None = None) -> list[tuple[str, SessionLog]]:
    """Every session of a recording root exactly as written (an open turn stays open), each
    with the name a reader shows for it (``<id>.jsonl``: the backend's export), ordered by
    ``(createdAt, id)``. Writes nothing.

    Raises:
        DshError: a log cannot be read (``LogFormatError`` names the root, session and line);
            dsh_core.plugins.PluginError: the root's backend is not installed.
    """
    _check_root(root)
    backend = store_backend(detect_store(root, store))
    return [
        (
            f"{header.id}.jsonl",
            read_log_text(backend.export_log(root, header.id), f"{root}:{header.id}"),
        )
        for header in backend.list_sessions(root)
    ]

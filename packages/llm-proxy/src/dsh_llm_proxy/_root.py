"""A recording root: which store holds the proxy's sessions, and reading them back as written.

The proxy keeps a recording in any installed store backend (``dsh.stores``, see
``dsh_core.plugins``), chosen by name (``--store``), in that backend's own layout under the
root. The name goes into a one-line marker file, :data:`STORE_MARKER`, so that a replay, the
gate and ``dsh-snapshot show`` read the root back through the same backend; a root without the
marker is read with the default backend (JSONL), as roots recorded before the marker were.
"""

from __future__ import annotations

from pathlib import Path

from dsh_core import DshError, SessionLog, SessionStore, read_log_text
from dsh_core.plugins import DEFAULT_STORE_BACKEND, store_backend

__all__ = [
    "STORE_MARKER",
    "detect_store",
    "is_recording_root",
    "open_store",
    "recorded_logs",
]

STORE_MARKER = ".dsh-proxy-store"
"""The file in a recording root that names its store backend (one line: ``sqlite``)."""


def open_store(root: Path, store: str) -> SessionStore:
    """The session store of a recording root, through the ``dsh.stores`` backend named
    ``store``; the root (created when missing) records the name for its readers.

    Raises:
        dsh_core.plugins.PluginError: no installed backend has that name.
        DshError: the root already names another backend.
    """
    backend = store_backend(store)
    root.mkdir(parents=True, exist_ok=True)
    marker = root / STORE_MARKER
    if marker.is_file():
        recorded = detect_store(root)
        if recorded != store:
            raise DshError(
                f"{root} holds a recording in store {recorded!r} ({marker}); "
                f"it cannot be opened as {store!r}"
            )
    else:
        marker.write_text(store + "\n", encoding="utf-8")
    return backend.open(root)


def detect_store(root: Path) -> str:
    """The store backend a recording root names (the default, JSONL, when it names none)."""
    marker = root / STORE_MARKER
    if not marker.is_file():
        return DEFAULT_STORE_BACKEND
    name = marker.read_text(encoding="utf-8").strip()
    if not name:
        raise DshError(f"{marker}: empty; it should name the root's store backend")
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


def recorded_logs(root: Path) -> list[tuple[str, SessionLog]]:
    """Every session of a recording root exactly as written (an open turn stays open), each
    with the name a reader shows for it (``<id>.jsonl``: the backend's export), ordered by
    ``(createdAt, id)``. Writes nothing.

    Raises:
        DshError: a log cannot be read (``LogFormatError`` names the root, session and line);
            dsh_core.plugins.PluginError: the root's backend is not installed.
    """
    backend = store_backend(detect_store(root))
    return [
        (
            f"{header.id}.jsonl",
            read_log_text(backend.export_log(root, header.id), f"{root}:{header.id}"),
        )
        for header in backend.list_sessions(root)
    ]

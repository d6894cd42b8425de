"""dsh-store-memory: a ``dsh.stores`` backend named ``memory`` (a test package, never released).

Every store opened over one root in one process shares one in-memory store (the conformance
suite opens several); when the last of them closes, the logs are dumped to ``<root>/memory.json``
atomically so that another process (the snapshot harvest after the agent exits) can list and
export them, and a later open over the root starts from them.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

from dsh_core import (
    CreateOptions,
    Session,
    SessionHeader,
    SessionLog,
    SessionNotFoundError,
    atomic_write,
    read_log_text,
    render_log,
)
from dsh_core.testing import InMemorySessionStore

__all__ = ["DUMP_FILE", "STORE_BACKEND", "MemoryStore", "MemoryStoreBackend"]

DUMP_FILE = "memory.json"


class _SharedStore(InMemorySessionStore):
    """The in-memory store of one root, with the raw logs it holds for dumping."""

    def __init__(self, logs: Sequence[SessionLog]) -> None:
        super().__init__()
        for log in logs:
            self._logs[log.header.id] = SessionLog(log.header, list(log.events))
        self.handles = 0

    def texts(self) -> dict[str, str]:
        """Every log as written (an open turn stays open), keyed by session id."""
        return {sid: render_log(log.header, log.events) for sid, log in self._logs.items()}


_lock = threading.Lock()
_open_roots: dict[Path, _SharedStore] = {}


def _read_dump(root: Path) -> dict[str, str]:
    path = root / DUMP_FILE
    if not path.is_file():
        return {}
    logs: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))["logs"]
    return logs


class MemoryStore:
    """A ``SessionStore`` handle over the shared in-memory store of one root."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._root = root.resolve()
        with _lock:
            shared = _open_roots.get(self._root)
            if shared is None:
                texts = _read_dump(self._root)
                shared = _SharedStore([read_log_text(t, sid) for sid, t in texts.items()])
                _open_roots[self._root] = shared
            shared.handles += 1
        self._shared: _SharedStore | None = shared

    def _store(self) -> _SharedStore:
        if self._shared is None:
            raise ValueError(f"the memory store over {self._root} is closed")
        return self._shared

    def create(self, options: CreateOptions) -> Session:
        return self._store().create(options)

    def resume(self, session_id: str) -> Session:
        return self._store().resume(session_id)

    def load(self, session_id: str) -> SessionLog:
        return self._store().load(session_id)

    def list_sessions(self) -> list[SessionHeader]:
        return self._store().list_sessions()

    def close(self) -> None:
        """The last handle over the root dumps its logs there and forgets them."""
        shared, self._shared = self._shared, None
        if shared is None:
            return
        with _lock:
            shared.handles -= 1
            if shared.handles == 0:
                del _open_roots[self._root]
                dump = json.dumps({"logs": shared.texts()}, ensure_ascii=False)
                atomic_write(self._root / DUMP_FILE, dump.encode("utf-8"))


def _texts(root: Path) -> dict[str, str]:
    """The logs of ``root``: those open in this process, else the dump (else none)."""
    with _lock:
        shared = _open_roots.get(root.resolve()) if root.is_dir() else None
        if shared is not None:
            return shared.texts()
    return _read_dump(root) if root.is_dir() else {}


class MemoryStoreBackend:
    """The ``memory`` store backend: what the ``dsh.stores`` entry point names."""

    name = "memory"
    settings_model = None
    embedded = True  # its data lives under the sessions root
    env_prefixes: tuple[str, ...] = ()

    def open(self, root: Path) -> MemoryStore:
        return MemoryStore(root)

    def list_sessions(self, root: Path) -> list[SessionHeader]:
        headers = [read_log_text(text, sid).header for sid, text in _texts(root).items()]
        return sorted(headers, key=lambda h: (h.created_at, h.id))

    def export_log(self, root: Path, session_id: str) -> str:
        text = _texts(root).get(session_id)
        if text is None:
            raise SessionNotFoundError(f"no session {session_id} in the memory store of {root}")
        return text

    def discard(self, root: Path) -> None:
        """Remove a finished run's sessions folder, the dump with it (none: nothing to do)."""
        shutil.rmtree(root, ignore_errors=True)


STORE_BACKEND = MemoryStoreBackend()

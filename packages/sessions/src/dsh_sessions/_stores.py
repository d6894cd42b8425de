"""Sessions roots kept behind a server, named ``BACKEND:ROOT`` (``postgres:/srv/agents/runs``).

A server store (one whose ``StoreBackend.embedded`` is false: PostgreSQL) keeps a namespace
per sessions root, named by the root's absolute path, so ``ROOT`` is the very path the agent
was given as its sessions root (a relative one is taken from the current directory, as the
agent takes it). Where the server is comes from the backend's own settings
(``DSH_POSTGRES_DSN`` or the ``PG*`` variables), never from the argument.

Everything goes through the ``dsh.stores`` registry (open, list, export, discard), so this
package needs no database driver: the backend is found when it is installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_core import (
    FORMAT_VERSION,
    CreateOptions,
    SessionMeta,
    StoreAccessError,
    read_log_text,
)
from dsh_core.plugins import StoreBackend, store_backend, store_backend_names
from dsh_sessions._convert import read_unique
from dsh_sessions._sources import Entry, Source, StoredLog, open_source

__all__ = ["StoreRoot", "convert_to_store", "open_any", "open_store_root", "parse_store_root"]

_SPEC = re.compile(r"([a-z][a-z0-9_-]+):(.*)", re.DOTALL)
_HINTS = {"postgres": "pip install dsh-persistence-postgres"}


@dataclass(frozen=True, slots=True)
class StoreRoot:
    """A sessions root in a server store: the backend's name and the root (absolute)."""

    backend: str
    root: Path

    def __str__(self) -> str:
        return f"{self.backend}:{self.root}"


def parse_store_root(text: str) -> StoreRoot | None:
    """``BACKEND:ROOT`` for an installed server backend (or ``postgres``), else ``None``: the
    text is a path (an existing file or folder is always a path).

    Raises:
        ValueError: no ROOT, the backend is not installed, or it is a file store.
    """
    match = _SPEC.fullmatch(text)
    if match is None or Path(text).exists():
        return None
    name, root = match.groups()
    installed = store_backend_names()
    if name not in installed and name not in _HINTS:
        return None
    if name not in installed:
        raise ValueError(
            f"{text}: the {name} store backend is not installed ({_HINTS[name]}); "
            f"installed: {', '.join(installed) or 'none'}"
        )
    if not root:
        raise ValueError(
            f"{text}: name the sessions root whose namespace to read or write, "
            f"{name}:ROOT (the path the agent was given as its sessions root)"
        )
    if store_backend(name).embedded:
        raise ValueError(f"{text}: the {name} store keeps files under its root: give {root}")
    return StoreRoot(name, Path(root).absolute())


def _where(backend: StoreBackend, spec: StoreRoot) -> str:
    """How messages name the namespace: the store's own description (the server without the
    password, the schema, the root) when it gives one."""
    store = backend.open(spec.root)
    try:
        where = getattr(store, "where", None)
        return where if isinstance(where, str) else str(spec)
    finally:
        store.close()


def open_store_root(spec: StoreRoot) -> Source:
    """List the sessions of ``spec``'s namespace, without writing a session.

    Raises:
        StoreAccessError: the server cannot be reached, or the namespace holds no session
            (no such root there): the message names the server, never its password.
    """
    backend = store_backend(spec.backend)
    where = _where(backend, spec)
    headers = backend.list_sessions(spec.root)
    if not headers:
        raise StoreAccessError(
            where, "no session is stored under this root (no such namespace); nothing to read"
        )

    def loader(session_id: str) -> Callable[[], StoredLog]:
        def load() -> StoredLog:
            text = backend.export_log(spec.root, session_id)
            source = f"{where} session {session_id}"
            log = read_log_text(text, source)
            rows: list[dict[str, Any]] = [json.loads(line) for line in text.splitlines()]
            return StoredLog(source, rows, log)

        return load

    entries = [Entry(f"{where} session {h.id}", loader(h.id)) for h in headers]
    return Source(Path(str(spec)), f"{spec.backend} ({where})", entries)


def open_any(path: Path) -> Source:
    """:func:`open_store_root` for a ``BACKEND:ROOT`` argument, else :func:`open_source`."""
    spec = parse_store_root(str(path))
    return open_store_root(spec) if spec is not None else open_source(path)


def _check_storable(log: StoredLog, spec: StoreRoot) -> None:
    # A store writes the header fields a creator chooses; anything else would be dropped.
    header = log.log.header
    lost = sorted(header.extra)
    if header.version != FORMAT_VERSION:
        lost.insert(0, f"version {header.version}")
    if lost:
        raise ValueError(
            f"{log.where}: {spec.backend} stores only the header fields a store creates, and "
            f"this header also has {', '.join(lost)}; nothing was written"
        )


def convert_to_store(source: Source, spec: StoreRoot) -> int:
    """Write every log of ``source`` into ``spec``'s namespace, which must hold no session
    yet; return how many. Everything is read and checked first; a failure part way discards
    the namespace again, so it ends whole or empty.

    Raises:
        FileExistsError: the namespace already holds sessions; nothing is written.
        ValueError: two logs share an id, or a header has fields the store cannot hold.
        StoreAccessError / LogFormatError / …: the server, or a damaged source log.
    """
    logs = read_unique(source)
    for log in logs:
        _check_storable(log, spec)
    backend = store_backend(spec.backend)
    store = backend.open(spec.root)
    try:
        where = getattr(store, "where", None)
        where = where if isinstance(where, str) else str(spec)
        held = store.list_sessions()
        if held:
            raise FileExistsError(
                f"{where} already holds {len(held)} sessions; convert writes a new store; "
                f"nothing was written"
            )
        try:
            for log in logs:
                header = log.log.header
                meta = SessionMeta(
                    created_at=header.created_at,
                    cwd=header.cwd,
                    parent_session=header.parent_session,
                    seed_length=header.seed_length,
                    origin=header.origin,
                    delegation_depth=header.delegation_depth,
                )
                # the whole log as the "seed": one transaction per session, its times kept
                options = CreateOptions(session_id=header.id, seed=log.log.events, meta=meta)
                store.create(options).close()
        except BaseException:
            backend.discard(spec.root)
            raise
    finally:
        store.close()
    return len(logs)

"""The ``jsonl`` entry of ``dsh.stores``: found by name, lists and exports with no file names."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core import CreateOptions, SessionMeta, SessionNotFoundError
from dsh_core.plugins import open_store, store_backend
from dsh_core.testing import synthetic_turn
from dsh_persistence_jsonl import JsonlSessionStore


def test_the_registry_opens_a_jsonl_store(tmp_path: Path) -> None:
    store = open_store("jsonl", tmp_path / "sessions")
    assert isinstance(store, JsonlSessionStore)
    assert store_backend("jsonl").settings_model is None


def test_list_and_export_give_what_was_written_and_write_nothing(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store = JsonlSessionStore(root)
    session = store.create(CreateOptions("a", meta=SessionMeta(created_at=2, cwd="/w")))
    for event in synthetic_turn(0, 1)[:-3]:  # an open turn: export must not close it
        session.add(event)
    session.flush()
    session.close()
    leftover = root / ".b.0123abcd.tmp"  # what a killed writer leaves; opening a store sweeps it
    leftover.write_bytes(b"half")
    backend = store_backend("jsonl")
    [header] = backend.list_sessions(root)
    assert (header.id, header.created_at) == ("a", 2)
    exported = backend.export_log(root, "a")
    assert exported.encode("utf-8") == store.path_of("a").read_bytes()
    assert leftover.read_bytes() == b"half"  # listing and export wrote nothing


def test_nothing_stored_lists_nothing_and_exports_an_error(tmp_path: Path) -> None:
    backend = store_backend("jsonl")
    assert backend.list_sessions(tmp_path / "absent") == []
    assert not (tmp_path / "absent").exists()
    with pytest.raises(SessionNotFoundError, match="no session x in"):
        backend.export_log(tmp_path / "absent", "x")
    with pytest.raises(SessionNotFoundError, match="no session x in"):
        backend.export_log(tmp_path, "x")

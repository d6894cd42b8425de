"""The ``sqlite`` entry of ``dsh.stores``: found by name, lists and exports with no file names."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core import CreateOptions, SessionMeta, SessionNotFoundError, read_log_text
from dsh_core.plugins import open_store, store_backend
from dsh_core.testing import synthetic_turn
from dsh_persistence_sqlite import Layout, SqliteSessionStore


def test_the_registry_opens_an_sqlite_store_in_the_root(tmp_path: Path) -> None:
    store = open_store("sqlite", tmp_path)
    try:
        assert isinstance(store, SqliteSessionStore)
        assert store.path.parent == tmp_path
    finally:
        store.close()


def test_list_and_export_give_the_rows_as_written(tmp_path: Path) -> None:
    store = open_store("sqlite", tmp_path)
    turn = synthetic_turn(0, 1)[:-3]  # an open turn: export must not close it
    try:
        session = store.create(CreateOptions("a", meta=SessionMeta(created_at=2, cwd="/w")))
        for event in turn:
            session.add(event)
        session.flush()
        session.close()
    finally:
        store.close()
    backend = store_backend("sqlite")
    [header] = backend.list_sessions(tmp_path)
    assert (header.id, header.created_at, header.cwd) == ("a", 2, "/w")
    log = read_log_text(backend.export_log(tmp_path, "a"), "export")
    assert [e.to_json() for e in log.events] == [e.to_json() for e in turn]


def test_a_root_without_a_database_lists_nothing_and_creates_nothing(tmp_path: Path) -> None:
    backend = store_backend("sqlite")
    assert backend.list_sessions(tmp_path) == []
    with pytest.raises(SessionNotFoundError, match="no session x in"):
        backend.export_log(tmp_path, "x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("setting", "layout"), [(None, Layout.V4), ("v4", Layout.V4), ("dsh", Layout.DSH)]
)
def test_dsh_sqlite_layout_chooses_a_fresh_databases_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str | None, layout: Layout
) -> None:
    if setting is None:
        monkeypatch.delenv("DSH_SQLITE_LAYOUT", raising=False)
    else:
        monkeypatch.setenv("DSH_SQLITE_LAYOUT", setting)
    store = open_store("sqlite", tmp_path)
    try:
        assert isinstance(store, SqliteSessionStore)
        assert store.layout is layout
    finally:
        store.close()
    assert "DSH_SQLITE_" in store_backend("sqlite").env_prefixes  # agents are handed it


def test_a_bad_layout_setting_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_SQLITE_LAYOUT", "v17")
    with pytest.raises(ValueError, match="layout"):
        open_store("sqlite", tmp_path)
    assert not (tmp_path / "sessions.sqlite3").exists()

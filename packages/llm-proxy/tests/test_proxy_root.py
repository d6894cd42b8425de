"""Reading a recording root back: ``recorded_logs`` and ``is_recording_root``, in two stores.

Where a root keeps its sessions is its store backend's business (any ``dsh.stores`` plugin);
the root names the backend. These tests pin what its readers (the gate's harvest,
``dsh-snapshot show``) get from it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_settings import SettingsConfigDict

import dsh_core.plugins
from dsh_core import CreateOptions, DshError, LogFormatError, SessionMeta
from dsh_core.plugins import UnknownPluginError
from dsh_core.testing import synthetic_turn
from dsh_llm_openai import ChatProvider, ChatSettings
from dsh_llm_proxy import (
    STORE_MARKER,
    detect_store,
    is_recording_root,
    open_recording_root,
    recorded_logs,
    upstream_defaults,
)

STORES = ("jsonl", "sqlite")


def _record(root: Path, kind: str) -> None:
    """A child created first but with the later ``createdAt``, and a parent left mid-turn."""
    store = open_recording_root(root, kind)
    try:
        store.create(
            CreateOptions("child", synthetic_turn(0, 1), SessionMeta(created_at=20))
        ).close()
        parent = store.create(CreateOptions("parent", meta=SessionMeta(created_at=10)))
        for event in synthetic_turn(0, 1)[:5]:  # the turn stays open: no turn/end
            parent.add(event)
        parent.close()
    finally:
        store.close()


@pytest.mark.parametrize("kind", STORES)
def test_a_root_is_read_in_creation_order_exactly_as_written(tmp_path: Path, kind: str) -> None:
    _record(tmp_path, kind)
    assert is_recording_root(tmp_path)
    logs = recorded_logs(tmp_path)
    assert [log.header.id for _, log in logs] == ["parent", "child"]
    assert [name for name, _ in logs] == ["parent.jsonl", "child.jsonl"]
    assert detect_store(tmp_path) == kind
    assert (tmp_path / STORE_MARKER).read_text() == kind + "\n"
    parent = logs[0][1]
    assert len(parent.events) == 5  # the open turn is not closed by the reader
    assert [e.type for e in logs[1][1].events] == [e.type for e in synthetic_turn(0, 1)]


def test_a_folder_without_recorded_sessions_is_not_a_root(tmp_path: Path) -> None:
    assert not is_recording_root(tmp_path / "absent")
    assert not is_recording_root(tmp_path)
    (tmp_path / "notes.txt").write_text("not a log")
    (tmp_path / ".hidden.jsonl").write_text("not ours either")
    assert not is_recording_root(tmp_path)
    assert recorded_logs(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hidden.jsonl", "notes.txt"]


def test_a_damaged_log_still_marks_a_root_and_reading_it_names_the_file(tmp_path: Path) -> None:
    _record(tmp_path, "jsonl")
    damaged = tmp_path / "child.jsonl"
    damaged.write_text('{"type":"session","version":0,"id":"child"\n')
    assert is_recording_root(tmp_path)
    with pytest.raises(LogFormatError) as caught:
        recorded_logs(tmp_path)
    assert caught.value.source == str(damaged)  # the backend names its own file
    assert caught.value.line == 1


def test_a_root_without_the_marker_is_read_with_the_default_store(tmp_path: Path) -> None:
    _record(tmp_path, "jsonl")
    (tmp_path / STORE_MARKER).unlink()  # as roots recorded before the marker
    assert detect_store(tmp_path) == "jsonl"
    assert is_recording_root(tmp_path)
    assert [log.header.id for _, log in recorded_logs(tmp_path)] == ["parent", "child"]


def test_a_root_keeps_its_store(tmp_path: Path) -> None:
    _record(tmp_path, "jsonl")
    with pytest.raises(DshError, match=r"holds a recording in store 'jsonl'.*as 'sqlite'"):
        open_recording_root(tmp_path, "sqlite")
    (tmp_path / STORE_MARKER).write_text("\n")
    with pytest.raises(DshError, match="empty; it should name the root's store backend"):
        detect_store(tmp_path)


def test_an_unknown_store_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(UnknownPluginError, match="no-such-store"):
        open_recording_root(tmp_path / "root", "no-such-store")
    (tmp_path / "named").mkdir()
    (tmp_path / "named" / STORE_MARKER).write_text("no-such-store\n")
    with pytest.raises(UnknownPluginError, match="no-such-store"):
        recorded_logs(tmp_path / "named")


@pytest.mark.parametrize("default", ["openai", "no-such-provider", "replay"])
def test_the_default_upstream_is_the_default_providers_or_the_generic_api(
    monkeypatch: pytest.MonkeyPatch, default: str
) -> None:
    # The proxy names no vendor: the default model provider's profile says where a recording
    # goes and which variable holds its key; one that is missing, or does not speak chat
    # completions (replay), leaves the generic OpenAI-compatible API's.
    monkeypatch.setattr(dsh_core.plugins, "DEFAULT_MODEL_PROVIDER", default)
    assert upstream_defaults() == ("https://api.openai.com/v1", "OPENAI_API_KEY")


def test_the_default_upstream_follows_a_chat_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    class Vendor(ChatSettings):
        model_config = SettingsConfigDict(env_prefix="VENDOR_")
        base_url: str = "https://vendor.invalid/v1"

    monkeypatch.setattr(dsh_core.plugins, "DEFAULT_MODEL_PROVIDER", "vendor")
    provider = ChatProvider("vendor", Vendor)

    def found(name: str) -> ChatProvider[Vendor]:
        assert name == "vendor"
        return provider

    monkeypatch.setattr(dsh_core.plugins, "model_provider", found)
    assert upstream_defaults() == ("https://vendor.invalid/v1", "VENDOR_API_KEY")


def test_a_recordings_marker_never_chooses_a_server_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team 4 F17: a committed ``.dsh-proxy-store`` naming ``postgres`` made ``show`` and
    ``dsh-llm-proxy replay`` connect to the user's database."""
    from dsh_llm_proxy import load_recording  # noqa: PLC0415 - one test's names
    from dsh_llm_proxy._root import STORE_MARKER, detect_store, recorded_logs  # noqa: PLC0415

    try:
        assert not dsh_core.plugins.store_backend("postgres").embedded
    except UnknownPluginError:
        pytest.skip("dsh-persistence-postgres is not installed")
    monkeypatch.delenv("DSH_STORE", raising=False)
    root = tmp_path / "recording"
    root.mkdir()
    (root / STORE_MARKER).write_text("postgres\n")
    for read in (detect_store, recorded_logs, load_recording):
        with pytest.raises(DshError, match="never chooses a server store"):
            read(root)
    assert detect_store(root, "postgres") == "postgres"  # the caller's own --store
    monkeypatch.setenv("DSH_STORE", "postgres")
    assert detect_store(root) == "postgres"  # the user's own environment
    monkeypatch.delenv("DSH_STORE")
    (root / STORE_MARKER).write_text("sqlite\n")
    assert detect_store(root) == "sqlite"  # an embedded store stays the marker's to name

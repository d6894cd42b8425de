"""Every upstream recording (June-2026 and head eras) loads through the JSONL store's reader,
event for event as the log reader reads it, without the store writing anything."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core import SessionLog, dumps_event, read_log_bytes
from dsh_core.testing import corpus_unavailable, upstream_corpus
from dsh_persistence_jsonl import JsonlSessionStore

pytestmark = pytest.mark.corpus

Record = Callable[[str, object], None]


@pytest.fixture(scope="module")
def corpus_files() -> list[Path]:
    root = upstream_corpus(__file__)
    files = sorted(root.rglob("session*.jsonl")) if root is not None else []
    if not files:
        corpus_unavailable(
            f"no upstream corpus recordings found at {root} (set DSH_UPSTREAM_CORPUS)"
        )
    return files


def test_every_recording_loads_through_the_jsonl_store(
    corpus_files: list[Path], tmp_path: Path, record_property: Record
) -> None:
    events = 0
    closed = 0
    for index, path in enumerate(corpus_files):
        expected = read_log_bytes(path.read_bytes(), str(path))
        # a root of its own per recording: several recordings share a session id
        root = tmp_path / str(index)
        root.mkdir()
        copy = root / f"{expected.header.id}.jsonl"
        shutil.copyfile(path, copy)
        store = JsonlSessionStore(root)
        loaded: SessionLog = store.load(expected.header.id)
        assert loaded.header == expected.header
        n = len(expected.events)
        assert [dumps_event(e) for e in loaded.events[:n]] == [
            dumps_event(e) for e in expected.events
        ], path
        extra = loaded.events[n:]
        if extra:  # a recording that stops mid-turn: the view closes it
            assert extra[-1].type == "turn/end", path
            assert extra[-1].data["reason"] == {"kind": "interrupted"}
            closed += 1
        assert [h.id for h in store.list_sessions()] == [expected.header.id]
        assert copy.read_bytes() == path.read_bytes()  # loading wrote nothing
        events += n
    record_property("corpus_store_files", len(corpus_files))
    record_property("corpus_store_events", events)
    print(
        f"upstream corpus via JsonlSessionStore: {len(corpus_files)} files, {events} "
        f"logical events, {closed} ending mid-turn"
    )

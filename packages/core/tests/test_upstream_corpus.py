"""Every upstream recording (June-2026 and head eras) reads through the log reader and the
JSONL store's reader; the fork children carry a seedLength that ends on the parent's turn."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core import SessionLog, dumps_event, read_log_bytes, read_log_text

pytestmark = pytest.mark.corpus

_DEFAULT = Path(__file__).resolve().parents[3].parent / "shared" / "upstream-corpus"
FORK_CHILDREN = [
    "june/subagent-fork/session.1.jsonl",
    "head/subagent-fork-in-process/session.1.jsonl",
]

Record = Callable[[str, object], None]


@pytest.fixture(scope="module")
def corpus() -> Path:
    root = Path(os.environ.get("DSH_UPSTREAM_CORPUS", _DEFAULT))
    if not root.is_dir():
        pytest.skip(f"upstream corpus {root} is absent (set DSH_UPSTREAM_CORPUS)")
    return root


@pytest.fixture(scope="module")
def corpus_files(corpus: Path) -> list[Path]:
    files = sorted(corpus.rglob("session*.jsonl"))
    if not files:
        pytest.skip(f"no session*.jsonl under {corpus}")
    return files


def _read(path: Path) -> SessionLog:
    return read_log_bytes(path.read_bytes(), str(path))


def test_every_recording_reads_through_the_log_reader(
    corpus: Path, corpus_files: list[Path], record_property: Record
) -> None:
    events = 0
    eras: dict[str, int] = {}
    for path in corpus_files:
        log = _read(path)
        assert [e.seq for e in log.events] == list(range(len(log.events))), path
        # the one-pass reader agrees with the line reader on every recording
        fast = read_log_text(path.read_text("utf-8"), str(path))
        assert fast.header == log.header
        assert [dumps_event(e) for e in fast.events] == [dumps_event(e) for e in log.events]
        if log.header.seed_length is not None:
            assert log.header.seed_length <= len(log.events), path
        events += len(log.events)
        era = path.relative_to(corpus).parts[0]
        eras[era] = eras.get(era, 0) + 1
    record_property("corpus_files", len(corpus_files))
    record_property("corpus_events", events)
    print(f"upstream corpus: {len(corpus_files)} files, {events} logical events, eras {eras}")
    assert set(eras) >= {"june", "head"}


def test_every_recording_loads_through_the_jsonl_store(
    corpus: Path, corpus_files: list[Path], tmp_path: Path, record_property: Record
) -> None:
    jsonl = pytest.importorskip("dsh_persistence_jsonl", reason="dsh-persistence-jsonl absent")
    events = 0
    closed = 0
    for index, path in enumerate(corpus_files):
        expected = _read(path)
        # a root of its own per recording: several recordings share a session id
        root = tmp_path / str(index)
        root.mkdir()
        copy = root / f"{expected.header.id}.jsonl"
        shutil.copyfile(path, copy)
        store = jsonl.JsonlSessionStore(root)
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


@pytest.mark.parametrize("child", FORK_CHILDREN)
def test_fork_child_seed_ends_on_the_parents_turn_end(corpus: Path, child: str) -> None:
    path = corpus / child
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    log = _read(path)
    seed_length = log.header.seed_length
    assert seed_length is not None
    assert seed_length > 0
    assert log.header.parent_session
    assert log.events[seed_length - 1].type == "turn/end"
    assert log.events[seed_length].type != "turn/end"
    parent = _read(path.with_name("session.jsonl"))
    assert parent.header.id == log.header.parent_session

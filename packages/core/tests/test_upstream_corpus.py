"""Every upstream recording (June-2026 and head eras) reads through the log readers; the fork
children carry a seedLength that ends on the parent's turn. (The JSONL store's reader is checked
on the same corpus in dsh-persistence-jsonl's tests.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core import SessionLog, dumps_event, read_log_bytes, read_log_text
from dsh_core.testing import corpus_unavailable, upstream_corpus

pytestmark = pytest.mark.corpus

FORK_CHILDREN = [
    "june/subagent-fork/session.1.jsonl",
    "head/subagent-fork-in-process/session.1.jsonl",
]

Record = Callable[[str, object], None]


@pytest.fixture(scope="module")
def corpus() -> Path:
    root = upstream_corpus(__file__) or Path("upstream-corpus (not found)")
    if not root.is_dir():
        corpus_unavailable(f"upstream corpus {root} is absent (set DSH_UPSTREAM_CORPUS)")
    return root


@pytest.fixture(scope="module")
def corpus_files(corpus: Path) -> list[Path]:
    files = sorted(corpus.rglob("session*.jsonl"))
    if not files:
        corpus_unavailable(f"no session*.jsonl under {corpus}")
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


@pytest.mark.parametrize("child", FORK_CHILDREN)
def test_fork_child_seed_ends_on_the_parents_turn_end(corpus: Path, child: str) -> None:
    path = corpus / child
    if not path.is_file():
        corpus_unavailable(f"{path} is absent")
    log = _read(path)
    seed_length = log.header.seed_length
    assert seed_length is not None
    assert seed_length > 0
    assert log.header.parent_session
    assert log.events[seed_length - 1].type == "turn/end"
    assert log.events[seed_length].type != "turn/end"
    parent = _read(path.with_name("session.jsonl"))
    assert parent.header.id == log.header.parent_session

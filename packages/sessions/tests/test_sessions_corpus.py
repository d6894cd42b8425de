"""Every upstream recording (June and HEAD eras) converts losslessly: kept as rows it comes
back byte for byte, and through dsh-py's SQLite layout it comes back event for event."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core import dumps_event
from dsh_core.testing import corpus_unavailable, upstream_corpus
from dsh_sessions import Target, convert, open_source, read_jsonl

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def corpus_files() -> list[Path]:
    root = upstream_corpus(__file__)
    files = sorted(root.rglob("session*.jsonl")) if root is not None else []
    if not files:
        corpus_unavailable(
            f"no upstream corpus recordings found at {root} (set DSH_UPSTREAM_CORPUS)"
        )
    return files


def test_every_recording_comes_back_byte_for_byte(corpus_files: list[Path]) -> None:
    for path in corpus_files:
        assert read_jsonl(path).text() == path.read_text(encoding="utf-8"), path


def test_every_recording_survives_sqlite_event_for_event(
    corpus_files: list[Path], tmp_path: Path
) -> None:
    for index, path in enumerate(corpus_files):
        database = tmp_path / f"{index}.sqlite3"
        convert(open_source(path), database, Target.SQLITE)
        [entry] = open_source(database).entries
        back = entry.load()
        original = read_jsonl(path)
        assert back.log.header == original.log.header, path
        assert [dumps_event(e) for e in back.log.events] == [
            dumps_event(e) for e in original.log.events
        ], path

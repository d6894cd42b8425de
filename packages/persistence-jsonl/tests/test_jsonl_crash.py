"""SIGKILL a real JSONL writer subprocess at random moments; every acknowledged batch survives."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core.testing import crash_kills, run_crash_trials
from dsh_persistence_jsonl import JsonlSessionStore


@pytest.mark.crash
def test_jsonl_survives_sigkill_of_its_writer(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    root = tmp_path / "sessions"
    kills = crash_kills()
    report = run_crash_trials(
        "dsh_persistence_jsonl:JsonlSessionStore", root, kills=kills, seed=20261129
    )
    record_property("crash", report.summary())
    print(f"jsonl crash: {report.summary()}")
    assert report.kills == kills
    assert report.acknowledged_batches > 0, report.summary()
    assert report.verified_events > 0, report.summary()
    # every session the harness wrote still loads, resumes and ends with a closed turn
    store = JsonlSessionStore(root)
    headers = store.list_sessions()
    assert 1 <= len(headers) <= report.sessions
    for header in headers:
        session = store.resume(header.id)
        session.close()
        assert session.events[-1].type == "turn/end"
        assert store.load(header.id).events == list(session.events)
    assert not list(root.glob(".*.tmp")) or report.killed_before_ready > 0


_LOSSY_STORE = '''
"""A JSONL store whose writer corrupts one event of each batch: the harness must notice."""

from dsh_core import Event
from dsh_persistence_jsonl import JsonlSessionStore


class _Skewed:
    def __init__(self, inner):
        self.inner = inner

    def append(self, events):
        events = list(events)
        if len(events) > 3:
            e = events[3]
            events[3] = Event(e.type, e.seq, e.time + 1, e.data)
        self.inner.append(events)

    def close(self):
        self.inner.close()


class SkewedStore(JsonlSessionStore):
    def create(self, options):
        session = super().create(options)
        session._writer = _Skewed(session._writer)
        return session

    def resume(self, session_id):
        session = super().resume(session_id)
        session._writer = _Skewed(session._writer)
        return session
'''


@pytest.mark.crash
def test_the_harness_catches_a_store_that_changes_acknowledged_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "dsh_skewed_store.py").write_text(_LOSSY_STORE)
    # the writer inherits the parent's path
    monkeypatch.syspath_prepend(str(module_dir))  # pyright: ignore[reportUnknownMemberType]
    with pytest.raises(AssertionError, match=r"acknowledged\) differs after a kill"):
        run_crash_trials(
            "dsh_skewed_store:SkewedStore",
            tmp_path / "s",
            kills=3,
            seed=1,
            early_kill_rate=0.0,
            min_acks=1,
        )

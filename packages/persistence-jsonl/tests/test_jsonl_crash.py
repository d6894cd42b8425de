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

"""SIGKILL a real SQLite writer subprocess at random moments; every acknowledged batch survives."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core.testing import run_crash_trials
from dsh_core.testing._crash import crash_kills
from dsh_persistence_sqlite import SqliteSessionStore


@pytest.mark.crash
def test_sqlite_survives_sigkill_of_its_writer(tmp_path: Path) -> None:
    location = tmp_path / "crash.sqlite3"
    kills = crash_kills()
    report = run_crash_trials(
        "dsh_persistence_sqlite:SqliteSessionStore", location, kills=kills, seed=20261129
    )
    assert report.kills == kills
    assert report.acknowledged_batches > 0, report.summary()
    assert report.verified_events > 0, report.summary()
    # the store is still a healthy version-4 database afterwards
    with SqliteSessionStore(location) as store:
        listed = store.list_sessions()
    assert listed, report.summary()
    assert {h.id for h in listed} <= {f"crash-20261129-{n}" for n in range(1, kills + 1)}

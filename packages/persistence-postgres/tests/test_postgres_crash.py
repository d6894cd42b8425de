"""SIGKILL a real writer subprocess of a real server at random moments: every acknowledged
batch survives, and no batch is ever half visible."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core.testing import run_crash_trials
from dsh_core.testing._crash import crash_kills
from dsh_persistence_postgres import PostgresSessionStore, PostgresSettings

SEED = 20261201


def _kill_writers(
    root: Path,
    settings: PostgresSettings,
    kills: int,
    *,
    early_kill_rate: float = 0.15,
    min_acks: int = 0,
) -> None:
    # The writer subprocesses find the server through DSH_POSTGRES_DSN (the settings fixture
    # exported it); the root names the namespace.
    report = run_crash_trials(
        "dsh_persistence_postgres:PostgresSessionStore",
        root,
        kills=kills,
        seed=SEED,
        early_kill_rate=early_kill_rate,
        min_acks=min_acks,
    )
    assert report.kills == kills
    assert report.acknowledged_batches > 0, report.summary()
    assert report.verified_events > 0, report.summary()
    store = PostgresSessionStore(root, settings)
    listed = store.list_sessions()
    assert listed, report.summary()
    assert {h.id for h in listed} <= {f"crash-{SEED}-{n}" for n in range(1, kills + 1)}
    # A batch is one whole turn and one transaction: a kill can only land between batches,
    # so no resume ever found a turn to close ("interrupted"): no half batch was visible.
    for header in listed:
        ends = [
            e.data["reason"]["kind"] for e in store.load(header.id).events if e.type == "turn/end"
        ]
        assert "interrupted" not in ends, (header.id, report.summary())


def test_a_few_kills_of_a_writer_lose_nothing(tmp_path: Path, settings: PostgresSettings) -> None:
    """The quick form, in the default tests: the harness and the store meet on every run.
    Every kill lands in the append loop, after at least one acknowledged batch, so even
    three kills check something."""
    _kill_writers(tmp_path / "crash-root", settings, kills=3, early_kill_rate=0.0, min_acks=1)


@pytest.mark.crash
def test_postgres_survives_sigkill_of_its_writer(
    tmp_path: Path, settings: PostgresSettings
) -> None:
    """The soak: `nox -s crash` (DSH_CRASH_KILLS, 500 by default)."""
    _kill_writers(tmp_path / "crash-root", settings, kills=crash_kills())

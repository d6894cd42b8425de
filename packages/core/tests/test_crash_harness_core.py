"""The crash harness's configuration and the deterministic turns it writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core import SessionHeader, SessionStore, dumps_event, read_log_text, render_log
from dsh_core.testing import (
    CrashReport,
    crash_kills,
    event_time,
    run_crash_trials,
    synthetic_turn,
)
from dsh_core.testing._crash_common import crash_seed, load_store_class


def test_crash_kills_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_CRASH_KILLS", raising=False)
    assert crash_kills() == 50
    assert crash_kills(default=7) == 7
    monkeypatch.setenv("DSH_CRASH_KILLS", " 500 ")
    assert crash_kills() == 500
    for bad in ("lots", "0", "-3"):
        monkeypatch.setenv("DSH_CRASH_KILLS", bad)
        with pytest.raises(ValueError, match="DSH_CRASH_KILLS"):
            crash_kills()


def test_store_spec_is_module_colon_class() -> None:
    cls = load_store_class("dsh_core.testing:InMemorySessionStore")
    assert isinstance(cls(), SessionStore)
    for bad in ("dsh_core.testing", ":X", "dsh_core:"):
        with pytest.raises(ValueError, match="module:Class"):
            load_store_class(bad)
    with pytest.raises(AttributeError):
        load_store_class("dsh_core.testing:NoSuchStore")


def test_synthetic_turns_are_deterministic_whole_turns() -> None:
    first = synthetic_turn(40, 3)
    assert [dumps_event(e) for e in first] == [dumps_event(e) for e in synthetic_turn(40, 3)]
    assert [e.seq for e in first] == list(range(40, 40 + len(first)))
    assert [e.time for e in first] == [event_time(e.seq) for e in first]
    assert (first[0].type, first[-1].type) == ("turn/start", "turn/end")
    sizes = {len(synthetic_turn(0, turn)) for turn in range(40)}
    assert min(sizes) >= 12
    assert len(sizes) > 5  # batch sizes vary
    assert synthetic_turn(0, 1) != synthetic_turn(1, 1)[:-1]
    seed = crash_seed()
    assert [e.seq for e in seed] == list(range(len(seed)))


def test_synthetic_turns_survive_the_log_format() -> None:
    events = synthetic_turn(0, 5)
    log = read_log_text(render_log(SessionHeader(id="x", created_at=1), events))
    assert [dumps_event(e) for e in log.events] == [dumps_event(e) for e in events]


def test_report_summary_names_every_count() -> None:
    report = CrashReport(
        kills=3,
        sessions=1,
        killed_before_ready=1,
        acknowledged_batches=4,
        verified_events=50,
        repaired_views=2,
    )
    assert report.summary() == (
        "3 kills over 1 sessions (1 before ready), 4 acknowledged "
        "batches, 50 events verified, 2 views past the last ack"
    )


def test_a_writer_that_dies_on_its_own_is_reported_with_its_stderr(tmp_path: Path) -> None:
    # InMemorySessionStore takes no location: the writer fails with a TypeError traceback
    with pytest.raises(RuntimeError, match=r"(?s)exited with 1 before the kill.*TypeError"):
        run_crash_trials(
            "dsh_core.testing:InMemorySessionStore",
            tmp_path / "x",
            kills=1,
            seed=0,
            early_kill_rate=0.0,
        )
    assert list(tmp_path.iterdir()) == []  # the stderr capture is cleaned up

"""Warm and cold runs: the same scenarios must give the same results both ways.

The default batch forks each agent from a warm, pre-imported server per worker; ``--cold``
starts a fresh interpreter per run. This file is the CI sample that keeps the two from drifting
apart, and checks the pool of warm servers recovers from a server that died.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_acp_agent import ForkServerError
from dsh_snapshot import COLD_ENV, SnapshotSettings, WarmAgents, load_scenario, run
from dsh_snapshot.cli import _parser  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.e2e


def test_warm_and_cold_runs_agree_on_both_backends(
    scenario_copy: Callable[[str], Path],
) -> None:
    scenarios = [load_scenario(scenario_copy(n)) for n in ("tool-call-turn", "subagent-spawn")]
    both = ("jsonl", "sqlite")
    warm = run(SnapshotSettings(jobs=2, stores=both), scenarios)
    cold = run(SnapshotSettings(jobs=2, cold=True, stores=both), scenarios)
    assert len(warm) == len(cold) == 4
    for w, c in zip(warm, cold, strict=True):
        assert w.ok, w.failures
        assert c.ok, c.failures
        assert (w.scenario.name, w.store) == (c.scenario.name, c.store)
        assert (w.logs, w.frames, w.sessions) == (c.logs, c.frames, c.sessions)
        assert (w.settings.cold, c.settings.cold) == (False, True)


def test_cold_is_a_flag_and_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(COLD_ENV, raising=False)
    assert _parser().parse_args(["replay", "x"]).cold is False
    assert _parser().parse_args(["refresh", "x", "--cold"]).cold is True
    monkeypatch.setenv(COLD_ENV, "1")
    assert _parser().parse_args(["proof", "x"]).cold is True


def test_a_dead_warm_server_is_replaced_and_a_closed_pool_refuses(tmp_path: Path) -> None:
    with WarmAgents(1) as agents:
        with agents.lease() as server:
            server.process.kill()
            server.process.wait()
        # Noticed when it comes back: the next lease starts a new server.
        with agents.lease() as fresh:
            assert fresh is not server
            assert fresh.process.poll() is None
    with pytest.raises(ForkServerError, match="closed"), agents.lease():
        pass

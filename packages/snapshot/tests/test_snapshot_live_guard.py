"""Replay runs the agent with live model calls off (``DSH_ALLOW_MODEL_REQUESTS=0``)."""

from __future__ import annotations

from pathlib import Path

from dsh_core import ALLOW_MODEL_REQUESTS_ENV
from dsh_snapshot import load_scenario
from dsh_snapshot._runner import RunOptions, _replay_env  # pyright: ignore[reportPrivateUsage]

_SNAPSHOTS = Path(__file__).resolve().parents[3] / "snapshots" / "sdk"


def test_the_replay_environment_turns_live_calls_off(tmp_path: Path) -> None:
    scenario = load_scenario(_SNAPSHOTS / "multi-turn")
    for options in (RunOptions(mode="replay"), RunOptions(mode="refresh", seed_slice=False)):
        env = _replay_env(scenario, tmp_path, options)
        assert env[ALLOW_MODEL_REQUESTS_ENV] == "0"
        assert env["DSH_MODEL_CLIENT"] == "replay"

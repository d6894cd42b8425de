"""Replay runs the agent with live model calls off (``DSH_ALLOW_MODEL_REQUESTS=0``)."""

from __future__ import annotations

from pathlib import Path

from dsh_core import ALLOW_MODEL_REQUESTS_ENV
from dsh_snapshot import SnapshotSettings, load_scenario
from dsh_snapshot._model_side import replay_env, replay_settings

_SNAPSHOTS = Path(__file__).resolve().parents[3] / "snapshots" / "sdk"


def test_the_replay_environment_turns_live_calls_off(tmp_path: Path) -> None:
    scenario = load_scenario(_SNAPSHOTS / "multi-turn")
    for settings in (
        SnapshotSettings(mode="replay"),
        SnapshotSettings(mode="refresh", seed_slice=False),
    ):
        env = replay_env(replay_settings(scenario, tmp_path, settings))
        assert env[ALLOW_MODEL_REQUESTS_ENV] == "0"
        assert env["DSH_MODEL_CLIENT"] == "replay"

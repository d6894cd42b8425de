"""The model side of a run is chosen once, from the scenario and the mode: one side per mode,
and a mode that cannot run a scenario says why before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_core import ScenarioFiles
from dsh_snapshot import AgentError, Scenario, SnapshotSettings, load_scenario
from dsh_snapshot._foreign import ForeignAgent
from dsh_snapshot._live import key_name, live_provider
from dsh_snapshot._model_side import (
    ForeignSide,
    LiveModel,
    OurAgent,
    ReplayModel,
    RunPlace,
    ScriptedModel,
    model_side,
)
from dsh_snapshot._settings import Mode
from dsh_snapshot.testing import INPUT, META, write


def _scenario(folder: Path, *files: str) -> Scenario:
    write(folder / ScenarioFiles.INPUT, json.dumps(INPUT))
    write(folder / ScenarioFiles.META, META)
    for name in files:
        content = '[{"kind": "hang"}]' if name == ScenarioFiles.OVERRIDE else "[]"
        write(folder / name, content)
    return load_scenario(folder)


def _place(scenario: Scenario, tmp: Path, mode: Mode, **fields: object) -> RunPlace:
    settings = SnapshotSettings.model_validate({"mode": mode, **fields})
    return RunPlace(
        scenario=scenario,
        settings=settings,
        store="jsonl",
        tmp=tmp,
        cwd=tmp / "cwd",
        root=tmp / "sessions",
        env={},
        hidden=[],
        sandbox_mode="warn",
        deadline=0.0,
    )


@pytest.mark.parametrize("mode", ["replay", "refresh"])
def test_a_replaying_mode_takes_the_replay_side_with_no_network(tmp_path: Path, mode: Mode) -> None:
    scenario = _scenario(tmp_path / "sdk" / "x")
    side = model_side(_place(scenario, tmp_path, mode), None)
    assert isinstance(side, OurAgent)
    assert isinstance(side.model, ReplayModel)
    assert not side.model.network
    assert side.report == tmp_path / "replay-report.json"
    assert side.model.replay.check_headers is (mode == "replay")


def test_an_authored_scenario_replays_its_script_even_in_record(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path / "sdk" / "x", ScenarioFiles.OVERRIDE)
    assert scenario.authored
    side = model_side(_place(scenario, tmp_path, "record"), None)
    assert isinstance(side, OurAgent)
    assert isinstance(side.model, ReplayModel)


def test_record_scripted_plays_the_script_and_needs_one(tmp_path: Path) -> None:
    scripted = _scenario(tmp_path / "sdk" / "s", ScenarioFiles.SCRIPT)
    side = model_side(_place(scripted, tmp_path, "record-scripted"), None)
    assert isinstance(side, OurAgent)
    assert side.model == ScriptedModel(scripted.path / ScenarioFiles.SCRIPT)
    assert side.report is None
    bare = _scenario(tmp_path / "sdk" / "b")
    with pytest.raises(AgentError, match=f"record --scripted needs {ScenarioFiles.SCRIPT}"):
        model_side(_place(bare, tmp_path, "record-scripted"), None)


def test_record_goes_live_and_needs_the_providers_key(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path / "sdk" / "x")
    name = key_name(live_provider())
    assert name is not None  # the default provider needs one
    side = model_side(_place(scenario, tmp_path, "record", api_key="not-a-real-key"), None)
    assert isinstance(side, OurAgent)
    assert isinstance(side.model, LiveModel)
    assert side.model.network
    with pytest.raises(AgentError, match=f"record needs {name}"):
        model_side(_place(scenario, tmp_path, "record"), None)


def test_keep_answers_is_for_a_foreign_agent_only(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path / "sdk" / "x")
    with pytest.raises(AgentError, match="--keep-answers records a foreign agent"):
        model_side(_place(scenario, tmp_path, "record-accept"), None)


@pytest.mark.parametrize(
    ("mode", "replaying"),
    [("replay", True), ("refresh", True), ("record-scripted", False), ("record-accept", False)],
)
def test_a_foreign_agent_takes_the_foreign_side_in_every_mode(
    tmp_path: Path, mode: Mode, replaying: bool
) -> None:
    scenario = _scenario(tmp_path / "sdk" / "x")
    side = model_side(_place(scenario, tmp_path, mode), ForeignAgent(("agent",)))
    assert isinstance(side, ForeignSide)
    assert side.replaying is replaying
    assert side.report is None  # known once the proxy has started

"""A live recording replays against the provider settings it was made with.

The runner strips the provider's variables from the agent's environment, so the replay's live config
would be the provider's defaults; a scenario recorded live with another model would then fail
with request drift forever. ``provenance:`` says what the recording was made with and the
runner hands it back to the agent (``dsh_snapshot._recorded_env``); ``agent_env`` still wins.

The scenario is a copy of ``subagent-parallel`` (``current`` loop, so its logs hold
``request/header``) made to look recorded live with ``deepseek-v4-pro`` at effort ``low``:
its headers and its ``provenance:`` say so, as a live record would have written them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_core.plugins import model_provider
from dsh_llm_replay import LIVE_PROVIDER_ENV
from dsh_scripted_server import resolve_profile
from dsh_snapshot import (
    Mode,
    ScenarioResult,
    SnapshotSettings,
    load_scenario,
    run,
    run_scenario,
)
from dsh_snapshot._provenance import Provenance, TokenTotals, with_provenance
from dsh_snapshot._recorded_env import recorded_provider_env

_SCENARIO = "subagent-parallel"
_PROVIDER = "deepseek"  # the scenario's recorded provider: a profile with thinking and effort
# Its variables, named by its settings model.
_MODEL_VAR, _THINKING_VAR, _EFFORT_VAR = (
    resolve_profile(_PROVIDER).env_name(field)
    for field in ("model", "thinking", "reasoning_effort")
)
_MODEL = "deepseek-v4-pro"  # not the provider's default (deepseek-flash)
_EFFORT = "low"  # not the resolved default (high)


def _run(folder: Path, mode: Mode = "replay", /, **env: str) -> ScenarioResult:
    settings = SnapshotSettings(mode=mode, agent_env=tuple(env.items()))
    return run_scenario(load_scenario(folder), settings)


def _provenance(**fields: Any) -> Provenance:
    return Provenance(
        provider=fields.get("provider", _PROVIDER),
        model=fields.get("model", _MODEL),
        thinking=fields.get("thinking", "enabled"),
        reasoningEffort=fields.get("reasoningEffort", _EFFORT),
        dshVersion="0.1.0",
        recordedAt=dt.date(2026, 11, 30),
        tokens=TokenTotals(calls=5, input=100, output=20, cacheRead=0, reasoning=0),
    )


def _make_live(folder: Path, provenance: Provenance | None) -> None:
    """Rewrite the copy as a live record with ``_MODEL`` / ``_EFFORT`` would have left it."""
    recorded = '"model":"deepseek-flash","reasoningEffort":"high"'
    for log in sorted(folder.glob("session*.jsonl")):
        text = log.read_text("utf-8")
        assert recorded in text, log  # the committed header names the defaults
        # a textual edit keeps every other byte as the agent wrote it
        text = text.replace(recorded, f'"model":"{_MODEL}","reasoningEffort":"{_EFFORT}"')
        log.write_text(text, "utf-8")
    meta = folder / "snapshot.yml"
    meta.write_text(with_provenance(meta.read_text("utf-8"), "live", provenance), "utf-8")


@pytest.fixture
def live_copy(scenario_copy: Callable[[str], Path]) -> Path:
    folder = scenario_copy(_SCENARIO)
    _make_live(folder, _provenance())
    return folder


def _drift(result: ScenarioResult) -> str:
    assert not result.ok
    drifts = [f for f in result.failures if f.startswith("request drift: ")]
    assert drifts, result.failures
    return drifts[0]


def test_a_live_recording_with_a_non_default_model_replays_green(live_copy: Path) -> None:
    result = _run(live_copy)
    assert result.ok, result.failures
    assert result.header_note == "request header: checked"


def test_the_gate_hands_the_settings_to_its_warm_forked_agents(live_copy: Path) -> None:
    # run() forks each agent from a warm server that replaces the child's whole environment
    results = run(SnapshotSettings(mode="replay"), [load_scenario(live_copy)])
    assert results, "no run"
    assert all(r.ok for r in results), [r.failures for r in results]


def test_without_provenance_the_same_recording_drifts_to_the_defaults(
    scenario_copy: Callable[[str], Path],
) -> None:
    # What every live recording with another model met before: the defaults were compared.
    folder = scenario_copy(_SCENARIO)
    _make_live(folder, None)
    failure = _drift(_run(folder))
    assert f'config.model: expected "{_MODEL}", actual "deepseek-flash"' in failure


@pytest.mark.parametrize(
    ("variable", "value", "field", "recorded"),
    [
        (_MODEL_VAR, "deepseek-flash", "config.model", _MODEL),
        (_EFFORT_VAR, "max", "config.reasoningEffort", _EFFORT),
    ],
)
def test_agent_env_still_wins_and_a_changed_setting_drifts(
    live_copy: Path, variable: str, value: str, field: str, recorded: str
) -> None:
    failure = _drift(_run(live_copy, **{variable: value}))
    assert f'turn 1, step 1: {field}: expected "{recorded}", actual "{value}"' in failure


def test_refresh_keeps_the_recorded_settings_and_changes_nothing(live_copy: Path) -> None:
    before = {p.name: p.read_bytes() for p in live_copy.iterdir()}
    refreshed = _run(live_copy, "refresh")
    assert refreshed.ok, refreshed.failures
    assert refreshed.written == []
    assert {p.name: p.read_bytes() for p in live_copy.iterdir()} == before


def test_an_invalid_recorded_setting_fails_naming_file_and_field(live_copy: Path) -> None:
    meta = live_copy / "snapshot.yml"
    text = with_provenance(meta.read_text("utf-8"), "live", _provenance(thinking="sometimes"))
    meta.write_text(text, "utf-8")
    result = _run(live_copy)
    assert not result.ok
    assert result.failures[0].startswith(
        f"ValueError: {meta}: provenance.thinking: 'sometimes' is not a valid deepseek "
        f"thinking ({_THINKING_VAR}): Input should be 'enabled' or 'disabled'"
    ), result.failures


def test_the_env_names_the_provider_and_its_settings_but_never_a_secret(live_copy: Path) -> None:
    env = recorded_provider_env(load_scenario(live_copy))
    assert env == {
        LIVE_PROVIDER_ENV: _PROVIDER,
        _MODEL_VAR: _MODEL,
        _THINKING_VAR: "enabled",
        _EFFORT_VAR: _EFFORT,
    }
    assert not set(env) & set(model_provider(_PROVIDER).secret_env_names)


def test_an_unset_recorded_effort_is_left_to_the_provider_default(live_copy: Path) -> None:
    meta = live_copy / "snapshot.yml"
    text = with_provenance(meta.read_text("utf-8"), "live", _provenance(reasoningEffort=None))
    meta.write_text(text, "utf-8")
    assert _EFFORT_VAR not in recorded_provider_env(load_scenario(live_copy))


@pytest.mark.parametrize(
    "provider",
    [
        "nonesuch",  # not installed here: replay compares prompt and tools only
        "replay",  # installed, but its settings have no prefix and no model
    ],
)
def test_a_provider_without_such_settings_is_named_alone(live_copy: Path, provider: str) -> None:
    meta = live_copy / "snapshot.yml"
    text = with_provenance(meta.read_text("utf-8"), "live", _provenance(provider=provider))
    meta.write_text(text, "utf-8")
    assert recorded_provider_env(load_scenario(live_copy)) == {LIVE_PROVIDER_ENV: provider}


def test_a_scripted_scenario_gets_the_provider_its_header_names(
    scenario_copy: Callable[[str], Path],
) -> None:
    # Made with that provider's defaults (DSH_RECORD_PROVIDER): no setting, only the name.
    folder = scenario_copy(_SCENARIO)
    assert recorded_provider_env(load_scenario(folder)) == {LIVE_PROVIDER_ENV: "deepseek"}
    primary = folder / "session.jsonl"
    primary.write_text(primary.read_text().replace('"provider":"deepseek"', '"provider":"gone"'))
    assert recorded_provider_env(load_scenario(folder)) == {}  # not installed: nothing to ask
    primary.write_text('{"type":"session","version":0,"id":"x","createdAt":1}\n')
    assert recorded_provider_env(load_scenario(folder)) == {}  # no request header: nothing

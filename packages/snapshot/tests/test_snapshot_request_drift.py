"""Request drift through the gate: the real agent against copies of committed scenarios.

``subagent-parallel`` is recorded with the ``current`` loop, whose logs hold
``request/header``: a changed system prompt (``DSH_SYSTEM_PROMPT_FILE``), a changed model
(the default provider's ``model`` setting) and a tool description that changed since the
recording each fail the replay with the file, turn, step and field; refresh then accepts the
new header. A June-era scenario has no header: it still passes, and the gate says it was not
checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsh_core.plugins import DEFAULT_MODEL_PROVIDER
from dsh_scripted_server import resolve_profile
from dsh_snapshot import Mode, ScenarioResult, SnapshotSettings, load_scenario, run_scenario

# The variable of the default provider's model, named by its settings.
_MODEL_VAR = resolve_profile(DEFAULT_MODEL_PROVIDER).env_name("model")

_CHECKED = "subagent-parallel"
_JUNE = "text-turn"


def _run(folder: Path, mode: Mode = "replay", /, **env: str) -> ScenarioResult:
    settings = SnapshotSettings(mode=mode, agent_env=tuple(env.items()))
    return run_scenario(load_scenario(folder), settings)


def _drift(result: ScenarioResult) -> str:
    assert not result.ok
    drifts = [f for f in result.failures if f.startswith("request drift: ")]
    assert drifts, result.failures
    assert result.failures[0] == drifts[0]  # the drift leads, before the log differences
    return drifts[0]


def _accepted_by_refresh(folder: Path, /, **env: str) -> None:
    refreshed = _run(folder, "refresh", **env)
    assert refreshed.ok, refreshed.failures
    assert "session.jsonl" in refreshed.written
    again = _run(folder, **env)
    assert again.ok, again.failures
    assert again.header_note == "request header: checked"


def test_a_changed_system_prompt_fails_at_system_then_refresh_accepts_it(
    scenario_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    folder = scenario_copy(_CHECKED)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("You are a different agent now.", encoding="utf-8")
    failure = _drift(_run(folder, DSH_SYSTEM_PROMPT_FILE=str(prompt)))
    assert f"{folder / 'session.jsonl'} (recorded session" in failure
    assert "turn 1, step 1: system: expected " in failure
    assert 'actual "You are a different agent now."' in failure
    _accepted_by_refresh(folder, DSH_SYSTEM_PROMPT_FILE=str(prompt))


def test_a_changed_model_fails_at_config_model_then_refresh_accepts_it(
    scenario_copy: Callable[[str], Path],
) -> None:
    folder = scenario_copy(_CHECKED)
    failure = _drift(_run(folder, **{_MODEL_VAR: "deepseek-v4-pro"}))
    assert failure.endswith(
        'turn 1, step 1: config.model: expected "deepseek-flash", actual "deepseek-v4-pro"; '
        "the recording was made with another request header: refresh or record the scenario "
        "to accept the new one"
    )
    _accepted_by_refresh(folder, **{_MODEL_VAR: "deepseek-v4-pro"})


def _set_recorded_bash_description(log: Path, text: str) -> None:
    rows: list[Any] = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row.get("type") == "request/header":
            for tool in row["data"]["header"]["tools"]:
                if tool["name"] == "bash":
                    tool["parameters"]["properties"]["command"]["description"] = text
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_a_tool_description_changed_since_the_recording_fails_at_its_path(
    scenario_copy: Callable[[str], Path],
) -> None:
    folder = scenario_copy(_CHECKED)
    # The recording was made when bash's command parameter was described differently.
    _set_recorded_bash_description(folder / "session.jsonl", "A command (old wording).")
    result = _run(folder)
    failure = _drift(result)
    assert (
        "turn 1, step 1: tools[bash].parameters.properties.command.description: "
        'expected "A command (old wording).", actual "The bash command to execute."'
    ) in failure
    # only the edited log drifted; its children's headers still match
    assert len([f for f in result.failures if f.startswith("request drift: ")]) == 1
    _accepted_by_refresh(folder)


def test_a_june_era_scenario_is_not_checked_and_says_so(
    scenario_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    folder = scenario_copy(_JUNE)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Another prompt the June recording cannot know.", encoding="utf-8")
    result = _run(folder, DSH_SYSTEM_PROMPT_FILE=str(prompt))
    assert result.ok, result.failures
    assert result.header_note == "request header: not recorded (june-era), not checked"

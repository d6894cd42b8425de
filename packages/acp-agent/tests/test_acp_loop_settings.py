"""The loop-profile settings of the agent process (``DSH_LOOP_PROFILE`` and friends)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_acp_agent._main import system_prompt
from dsh_acp_agent._settings import AgentSettings, SettingsError, load_settings
from dsh_core import DEFAULT_SYSTEM_PROMPT


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DSH_LOOP_PROFILE", "DSH_MAX_DELEGATION_DEPTH", "DSH_MAX_PARALLEL_TOOL_CALLS"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("env", "profile", "depth", "parallel"),
    [
        ({}, "current", None, 10),
        ({"DSH_LOOP_PROFILE": "june"}, "june", None, 10),
        ({"DSH_MAX_DELEGATION_DEPTH": "2", "DSH_MAX_PARALLEL_TOOL_CALLS": "3"}, "current", 2, 3),
    ],
)
def test_loop_settings(
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    profile: str,
    depth: int | None,
    parallel: int,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert (settings.loop_profile, settings.max_delegation_depth) == (profile, depth)
    assert settings.max_parallel_tool_calls == parallel


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DSH_LOOP_PROFILE", "july"),
        ("DSH_MAX_PARALLEL_TOOL_CALLS", "0"),
        ("DSH_MAX_DELEGATION_DEPTH", "-1"),
        ("DSH_MAX_DELEGATION_DEPTH", "1.5"),
        ("DSH_MAX_DELEGATION_DEPTH", str(2**53)),  # above Number.MAX_SAFE_INTEGER
    ],
)
def test_invalid_loop_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=f"^invalid {name}={value!r}: "):
        load_settings()


def test_the_system_prompt_file_replaces_the_built_in_prompt(tmp_path: Path) -> None:
    assert system_prompt(AgentSettings(sessions_root=tmp_path)) == DEFAULT_SYSTEM_PROMPT
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Answer in French.\n", encoding="utf-8")
    settings = AgentSettings(sessions_root=tmp_path, system_prompt_file=prompt)
    assert system_prompt(settings) == "Answer in French.\n"


def test_an_unreadable_system_prompt_file_names_the_variable(tmp_path: Path) -> None:
    missing = AgentSettings(sessions_root=tmp_path, system_prompt_file=tmp_path / "absent.txt")
    with pytest.raises(SettingsError, match=r"^invalid DSH_SYSTEM_PROMPT_FILE='.*absent\.txt'"):
        system_prompt(missing)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(SettingsError, match="DSH_SYSTEM_PROMPT_FILE"):
        system_prompt(AgentSettings(sessions_root=tmp_path, system_prompt_file=binary))

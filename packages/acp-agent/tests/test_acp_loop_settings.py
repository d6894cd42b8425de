"""The loop-profile settings of the agent process (``DSH_LOOP_PROFILE`` and friends)."""

from __future__ import annotations

import pytest

from dsh_acp_agent._settings import SettingsError, load_settings


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
    ],
)
def test_invalid_loop_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=f"^invalid {name}={value!r}: "):
        load_settings()

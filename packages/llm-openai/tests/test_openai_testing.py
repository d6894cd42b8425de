"""``dsh_llm_openai.testing.settings_factory``: one factory of test settings for every profile."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic_settings import SettingsConfigDict

from dsh_llm_openai import ChatSettings
from dsh_llm_openai.testing import SHORT_WAITS, TEST_KEY, settings_factory


class _Profile(ChatSettings):
    model_config = SettingsConfigDict(env_prefix="PROFILE_X_", extra="ignore")
    provider: ClassVar[str] = "profile-x"
    model: str = "x-large"
    temperature: float = 0.5


def test_short_waits_a_fake_key_and_the_base_url() -> None:
    settings = settings_factory(ChatSettings)("http://127.0.0.1:9/v1")
    assert type(settings) is ChatSettings
    assert settings.base_url == "http://127.0.0.1:9/v1"
    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == TEST_KEY
    assert {k: getattr(settings, k) for k in SHORT_WAITS} == SHORT_WAITS


def test_nothing_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "OPENAI_MODEL": "leaked",
        "OPENAI_MAX_RETRIES": "9",
        "OPENAI_API_KEY": "leaked-key",
        "PROFILE_X_TEMPERATURE": "1.5",
        "PROFILE_X_MODEL": "leaked",
    }.items():
        monkeypatch.setenv(name, value)
    generic = settings_factory(ChatSettings)("http://127.0.0.1:9/v1")
    assert (generic.model, generic.max_retries) == ("gpt-4o-mini", 2)
    assert generic.api_key is not None
    assert generic.api_key.get_secret_value() == TEST_KEY
    profile = settings_factory(_Profile)("http://127.0.0.1:9/v1")
    assert type(profile) is _Profile
    assert (profile.model, profile.temperature) == ("x-large", 0.5)


def test_overrides_and_an_own_key_win() -> None:
    overrides: dict[str, Any] = {"model": "x-small", "max_retries": 0, "temperature": 0.0}
    profile = settings_factory(_Profile, key="other")("http://h/v1", **overrides)
    assert (profile.model, profile.max_retries, profile.temperature) == ("x-small", 0, 0.0)
    assert profile.api_key is not None
    assert profile.api_key.get_secret_value() == "other"


def test_a_bad_override_is_refused_by_the_settings() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        settings_factory(ChatSettings)("http://h/v1", max_retries=-1)

"""The ``deepseek`` entry of ``dsh.models``: found by name, configured from the environment."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dsh_core.plugins import create_model, model_provider, secret_env_names
from dsh_llm_deepseek import DeepSeekClient, DeepSeekSettings
from dsh_llm_deepseek.testing import ScriptedModelServer


def test_the_registry_makes_a_deepseek_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_MODEL", "deepseek-v4-pro")
    provider = model_provider("deepseek")
    assert provider.settings_model is DeepSeekSettings
    assert provider.secret_env_names == ("DEEPSEEK_API_KEY",)
    assert "DEEPSEEK_API_KEY" in secret_env_names()
    client = create_model("deepseek")
    assert isinstance(client, DeepSeekClient)


def test_an_invalid_setting_is_the_settings_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_MAX_RETRIES", "many")
    with pytest.raises(ValidationError, match="max_retries"):
        create_model("deepseek")


def test_preflight_says_why_a_live_run_would_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = model_provider("deepseek")
    check = getattr(provider, "preflight")  # noqa: B009 - optional in the protocol
    with ScriptedModelServer(api_key="the-right-key") as server:
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        monkeypatch.setenv("DEEPSEEK_API_KEY", "the-right-key")
        assert check() is None
        monkeypatch.setenv("DEEPSEEK_API_KEY", "a-wrong-key")
        problem = check()
    assert problem is not None
    assert "rejected the API key (HTTP 401" in problem
    assert "a-wrong-key" not in problem

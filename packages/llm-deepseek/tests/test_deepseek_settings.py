"""DeepSeekSettings reads DEEPSEEK_* from the environment."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from dsh_llm_deepseek import DeepSeekClient, DeepSeekSettings


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("DEEPSEEK_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_defaults(clean_env: pytest.MonkeyPatch) -> None:
    settings = DeepSeekSettings()
    assert settings.api_key is None
    assert settings.base_url == "https://api.deepseek.com"
    assert settings.model == "deepseek-flash"
    assert (settings.thinking, settings.reasoning_effort) == ("enabled", None)
    assert settings.effective_reasoning_effort == "high"
    assert settings.send_session_id is False
    assert (settings.connect_timeout, settings.stream_idle_timeout) == (10.0, 300.0)
    assert settings.stream_deadline is None
    assert settings.max_retries == 5
    assert (settings.retry_base_wait, settings.retry_max_wait, settings.retry_jitter) == (
        0.5,
        10.0,
        0.1,
    )
    assert settings.max_retry_after == 60.0
    assert settings.max_tokens is None


def test_every_field_reads_its_env_var(clean_env: pytest.MonkeyPatch) -> None:
    env = {
        "DEEPSEEK_API_KEY": "sk-from-env",
        "DEEPSEEK_BASE_URL": "http://127.0.0.1:1234/v1",
        "DEEPSEEK_MODEL": "deepseek-v4-pro",
        "DEEPSEEK_THINKING": "enabled",
        "DEEPSEEK_REASONING_EFFORT": "max",
        "DEEPSEEK_SEND_SESSION_ID": "true",
        "DEEPSEEK_CONNECT_TIMEOUT": "1.5",
        "DEEPSEEK_STREAM_IDLE_TIMEOUT": "7",
        "DEEPSEEK_STREAM_DEADLINE": "9",
        "DEEPSEEK_MAX_RETRIES": "4",
        "DEEPSEEK_MAX_RETRY_AFTER": "30",
        "DEEPSEEK_RETRY_BASE_WAIT": "0.5",
        "DEEPSEEK_RETRY_MAX_WAIT": "4",
        "DEEPSEEK_RETRY_JITTER": "0.25",
        "DEEPSEEK_MAX_TOKENS": "2048",
    }
    for name, value in env.items():
        clean_env.setenv(name, value)
    settings = DeepSeekSettings()
    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "sk-from-env"
    assert (settings.base_url, settings.model) == ("http://127.0.0.1:1234/v1", "deepseek-v4-pro")
    assert (settings.thinking, settings.reasoning_effort) == ("enabled", "max")
    assert settings.send_session_id is True
    assert (settings.connect_timeout, settings.stream_idle_timeout, settings.stream_deadline) == (
        1.5,
        7.0,
        9.0,
    )
    assert (settings.max_retries, settings.max_retry_after) == (4, 30.0)
    assert (settings.retry_base_wait, settings.retry_max_wait) == (0.5, 4.0)
    assert settings.retry_jitter == 0.25
    assert settings.max_tokens == 2048


@pytest.mark.anyio
async def test_client_reads_env_when_given_no_settings(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DEEPSEEK_MODEL", "m-env")
    client = DeepSeekClient()
    try:
        assert client.settings.model == "m-env"
        assert repr(client) == "DeepSeekClient(base_url='https://api.deepseek.com', model='m-env')"
    finally:
        await client.aclose()


@pytest.mark.anyio
async def test_request_config_is_what_every_request_sends_and_holds_no_secret(
    clean_env: pytest.MonkeyPatch,
) -> None:
    assert DeepSeekSettings().request_config() == {
        "provider": "deepseek",
        "model": "deepseek-flash",
        "reasoningEffort": "high",
    }
    clean_env.setenv("DEEPSEEK_API_KEY", "sk-secret-value")
    clean_env.setenv("DEEPSEEK_MODEL", "deepseek-v4-pro")
    clean_env.setenv("DEEPSEEK_THINKING", "disabled")
    clean_env.setenv("DEEPSEEK_MAX_TOKENS", "512")
    client = DeepSeekClient()
    try:
        assert client.request_config == {
            "provider": "deepseek",
            "model": "deepseek-v4-pro",
            "reasoningEffort": "off",
            "maxTokens": 512,
        }
        assert "sk-secret" not in repr(client.request_config)
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DEEPSEEK_MAX_RETRIES", "-1"),
        ("DEEPSEEK_STREAM_IDLE_TIMEOUT", "0"),
        ("DEEPSEEK_STREAM_DEADLINE", "-5"),
        ("DEEPSEEK_MAX_TOKENS", "lots"),
        ("DEEPSEEK_THINKING", "sometimes"),
        ("DEEPSEEK_REASONING_EFFORT", "medium"),
        ("DEEPSEEK_RETRY_JITTER", "2"),
    ],
)
def test_invalid_values_are_rejected(name: str, value: str, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(name, value)
    with pytest.raises(ValidationError) as info:
        DeepSeekSettings()
    assert name.removeprefix("DEEPSEEK_").lower() in str(info.value)


def test_disabled_thinking_refuses_an_effort(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DEEPSEEK_THINKING", "disabled")
    assert DeepSeekSettings().effective_reasoning_effort == "off"
    clean_env.setenv("DEEPSEEK_REASONING_EFFORT", "off")
    assert DeepSeekSettings().effective_reasoning_effort == "off"
    clean_env.setenv("DEEPSEEK_REASONING_EFFORT", "low")
    with pytest.raises(ValidationError) as info:
        DeepSeekSettings()
    assert "DEEPSEEK_THINKING=disabled" in str(info.value)

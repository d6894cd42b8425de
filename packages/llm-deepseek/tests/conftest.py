"""Fixtures of the dsh-llm-deepseek tests: a scripted server and short-timeout settings."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from dsh_llm_deepseek import DeepSeekSettings
from dsh_llm_deepseek.testing import ScriptedModelServer

TEST_KEY = "sk-dsh-test-7f3a9c51e2b84d06aa11"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def test_key() -> str:
    return TEST_KEY


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


SettingsFactory = Callable[..., DeepSeekSettings]


@pytest.fixture
def make_settings(monkeypatch: pytest.MonkeyPatch) -> SettingsFactory:
    """Settings with short timeouts and waits, isolated from any DEEPSEEK_* in the env."""
    for name in list(os.environ):
        if name.startswith("DEEPSEEK_"):
            monkeypatch.delenv(name)

    def factory(base_url: str, **overrides: Any) -> DeepSeekSettings:
        values: dict[str, Any] = {
            "api_key": SecretStr(TEST_KEY),
            "base_url": base_url,
            "connect_timeout": 2.0,
            "stream_idle_timeout": 5.0,
            "send_session_id": True,
            "max_retries": 2,
            "retry_base_wait": 0.01,
            "retry_max_wait": 0.05,
            "max_retry_after": 2.0,
        }
        values.update(overrides)
        return DeepSeekSettings(**values)

    return factory

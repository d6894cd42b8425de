"""Fixtures of the dsh-scripted-server tests: short-timeout settings of the generic client."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import SecretStr

from dsh_llm_openai import ChatSettings

# Built at run time: no key-shaped string is committed (HELPERS.md).
TEST_KEY = "sk-" + "scripted-server-test-" + "0" * 12


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SettingsFactory = Callable[..., ChatSettings]


@pytest.fixture
def make_settings(monkeypatch: pytest.MonkeyPatch) -> SettingsFactory:
    """Settings with short timeouts and waits, isolated from any OPENAI_* in the env."""
    for name in list(os.environ):
        if name.startswith("OPENAI_"):
            monkeypatch.delenv(name)

    def factory(base_url: str, **overrides: Any) -> ChatSettings:
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
        return ChatSettings(**values)

    return factory

"""Fixtures of the dsh-llm-deepseek tests: a scripted server and short-timeout settings."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from dsh_llm_deepseek import DeepSeekSettings
from dsh_llm_openai.testing import TEST_KEY, settings_factory
from dsh_scripted_server import ScriptedModelServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def test_key() -> str:
    return TEST_KEY


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(profile=DeepSeekSettings) as srv:
        yield srv


SettingsFactory = Callable[..., DeepSeekSettings]


@pytest.fixture
def make_settings() -> SettingsFactory:
    """DeepSeek settings with short timeouts and waits; no DEEPSEEK_* of the environment."""
    return settings_factory(DeepSeekSettings)

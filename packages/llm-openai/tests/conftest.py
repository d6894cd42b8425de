"""Fixtures of the wire's tests: a scripted server playing the generic API, short-timeout
settings of the generic client (any profile's are built the same way:
``dsh_llm_openai.testing.settings_factory``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from dsh_llm_openai import ChatSettings
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
    with ScriptedModelServer() as srv:
        yield srv


SettingsFactory = Callable[..., ChatSettings]


@pytest.fixture
def make_settings() -> SettingsFactory:
    """Generic settings with short timeouts and waits; no OPENAI_* of the environment."""
    return settings_factory(ChatSettings)

"""Fixtures of the dsh-scripted-server tests: short-timeout settings of the generic client."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsh_llm_openai import ChatSettings
from dsh_llm_openai.testing import settings_factory


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SettingsFactory = Callable[..., ChatSettings]


@pytest.fixture
def make_settings() -> SettingsFactory:
    """Generic settings with short timeouts and waits; no OPENAI_* of the environment."""
    return settings_factory(ChatSettings)

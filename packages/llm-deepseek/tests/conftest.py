"""Fixtures of the dsh-llm-deepseek tests: the wire's (``dsh_scripted_server.testing``), with
DeepSeek's profile played by the server and configured by the settings."""

from __future__ import annotations

import pytest

from dsh_llm_deepseek import DeepSeekSettings
from dsh_llm_openai import ChatSettings
from dsh_scripted_server.testing import anyio_backend, make_settings, server, test_key

__all__ = ["anyio_backend", "make_settings", "server", "test_key"]


@pytest.fixture
def chat_profile() -> type[ChatSettings]:
    """DeepSeek's profile: the server plays its API, ``make_settings`` makes its settings."""
    return DeepSeekSettings

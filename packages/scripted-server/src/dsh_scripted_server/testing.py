"""pytest fixtures for the tests of a chat-completions client: a scripted server playing one
profile, and settings of that profile built without the environment.

The wire's tests and every profile's share them; a profile's ``conftest.py`` imports them and
says which profile it tests by overriding ``chat_profile`` (the generic API when it does not)::

    from dsh_scripted_server.testing import anyio_backend, make_settings, server, test_key

    __all__ = ["anyio_backend", "make_settings", "server", "test_key"]


    @pytest.fixture
    def chat_profile() -> type[ChatSettings]:
        return AcmeSettings  # the profile under test

This module imports pytest (the package does not require it): a conftest imports it, never the
package's own code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from dsh_llm_openai import ChatSettings
from dsh_llm_openai.testing import TEST_KEY, settings_factory
from dsh_scripted_server._server import ScriptedModelServer

__all__ = ["anyio_backend", "chat_profile", "make_settings", "server", "test_key"]


@pytest.fixture
def chat_profile() -> type[ChatSettings]:
    """The profile the server plays and the settings are made of: the generic API here; a
    profile's conftest overrides it with its settings class."""
    return ChatSettings


@pytest.fixture
def anyio_backend() -> str:
    """The tests' async backend: asyncio, as the agent runs."""
    return "asyncio"


@pytest.fixture
def test_key() -> str:
    """The fake key every ``make_settings`` object holds (built at run time)."""
    return TEST_KEY


@pytest.fixture
def server(chat_profile: type[ChatSettings]) -> Iterator[ScriptedModelServer]:
    """A scripted server on 127.0.0.1 playing ``chat_profile``."""
    with ScriptedModelServer(profile=chat_profile) as srv:
        yield srv


@pytest.fixture
def make_settings(chat_profile: type[ChatSettings]) -> Callable[..., ChatSettings]:
    """``make(base_url, **overrides)``: ``chat_profile`` settings with short timeouts and
    waits, and no variable of the environment (``dsh_llm_openai.testing.settings_factory``)."""
    return settings_factory(chat_profile)

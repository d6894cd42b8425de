"""The model client conformance suite, run against DeepSeek's profile on the wire: the client
the ``deepseek`` provider makes from ``DEEPSEEK_*``, against a server playing DeepSeek."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Sequence

import pytest

from dsh_core import ModelClient, ScriptEntry
from dsh_core.testing import ModelClientConformance, ScriptedClientFactory
from dsh_llm_deepseek import DeepSeekClient
from dsh_scripted_server import provider_client, remote_provider_client

_KEY = "deepseek-conformance-key"


class TestDeepSeekConformance(ModelClientConformance):
    @pytest.fixture
    def scripted_client(self) -> ScriptedClientFactory:
        @contextlib.contextmanager
        def make(scripts: Sequence[Sequence[ScriptEntry]]) -> Generator[ModelClient]:
            with provider_client("deepseek", scripts, api_key=_KEY) as client:
                assert isinstance(client, DeepSeekClient)
                yield client

        return make

    @pytest.fixture
    def secret(self) -> str | None:
        return _KEY

    @pytest.fixture
    def remote_client(self) -> Callable[[], ModelClient] | None:
        return lambda: remote_provider_client("deepseek")

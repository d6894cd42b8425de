"""The model client conformance suite, run against the generic provider ``openai``: the client
it makes from ``OPENAI_*``, against a server playing the generic chat-completions API."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Sequence

import pytest

from dsh_core import ModelClient, ScriptEntry
from dsh_core.testing import ModelClientConformance, ScriptedClientFactory
from dsh_scripted_server import provider_client, remote_provider_client

_KEY = "openai-conformance-key"


class TestOpenAIConformance(ModelClientConformance):
    @pytest.fixture
    def scripted_client(self) -> ScriptedClientFactory:
        @contextlib.contextmanager
        def make(scripts: Sequence[Sequence[ScriptEntry]]) -> Generator[ModelClient]:
            with provider_client("openai", scripts, api_key=_KEY) as client:
                yield client

        return make

    @pytest.fixture
    def secret(self) -> str | None:
        return _KEY

    @pytest.fixture
    def remote_client(self) -> Callable[[], ModelClient] | None:
        return lambda: remote_provider_client("openai")

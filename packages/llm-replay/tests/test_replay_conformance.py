"""The model client conformance suite, run against the replay client: the scripts are the
recorded sessions, bound in order of first calls. Replay holds no key and reaches no host, so
the redaction and live-call rules skip."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence

import pytest

from dsh_core import ModelClient, ScriptEntry
from dsh_core.testing import ModelClientConformance, ScriptedClientFactory
from dsh_llm_replay import ReplayHeader, ReplayModelClient, SessionScript


class TestReplayConformance(ModelClientConformance):
    @pytest.fixture
    def scripted_client(self) -> ScriptedClientFactory:
        @contextlib.contextmanager
        def make(scripts: Sequence[Sequence[ScriptEntry]]) -> Generator[ModelClient]:
            recorded = [
                SessionScript(f"session.{i}.jsonl", ReplayHeader(f"rec-{i}", i), tuple(script))
                for i, script in enumerate(scripts)
            ]
            yield ReplayModelClient(recorded)

        return make

"""The model client conformance suite: core's own ``ScriptedModel`` passes it, and a client
that breaks any one rule fails the test of that rule (and only that one)."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence

import pytest

from dsh_core import ModelClient, ScriptEntry
from dsh_core.testing import (
    ModelClientConformance,
    ScriptedClientFactory,
    ScriptedModel,
    chunk_union_problems,
)

pytest_plugins = ["pytester"]


class TestScriptedModelConformance(ModelClientConformance):
    @pytest.fixture
    def scripted_client(self) -> ScriptedClientFactory:
        @contextlib.contextmanager
        def make(scripts: Sequence[Sequence[ScriptEntry]]) -> Generator[ModelClient]:
            yield ScriptedModel(list(scripts))

        return make


# Each class wraps the conformant ScriptedModel and breaks one rule; the generated module runs
# the suite against all of them in a pytester subprocess-free run.
_BROKEN = '''
from __future__ import annotations

import asyncio
import contextlib
import os
import socket

import dsh_core

import pytest

from dsh_core import ModelError
from dsh_core.testing import ModelClientConformance, ScriptedModel

SECRET = "the-configured-key"


class Wrapped:
    """ScriptedModel, with ``chunks`` / ``failure`` / ``session`` to override."""

    def __init__(self, scripts):
        self.inner = ScriptedModel(list(scripts))

    @property
    def request_config(self):
        return self.inner.request_config

    async def aclose(self):
        await self.inner.aclose()

    def session(self, request):
        return request

    def chunks(self, chunks):
        return chunks

    def failure(self, exc):
        return exc

    def stream(self, request):
        return self._stream(self.session(request))

    async def _stream(self, request):
        try:
            async for chunk in self.inner.stream(request):
                for out in self.chunks([chunk]):
                    yield out
        except ModelError as exc:
            raise self.failure(exc) from None


class NoBlockStart(Wrapped):
    def chunks(self, chunks):
        return [c for c in chunks if c["type"] != "block-start"]


class WrongUsage(Wrapped):
    def chunks(self, chunks):
        return [
            {"type": "usage", "usage": {**c["usage"], "outputTokens": 0}}
            if c["type"] == "usage" else c
            for c in chunks
        ]


class OneSessionForAll(Wrapped):
    def session(self, request):
        return type(request)("everyone", request.messages)


class OwnCodes(Wrapped):
    # A code of its own for every status: well-formed, but not what the others say.
    def failure(self, exc):
        return ModelError(exc.message, code=f"HTTP_{exc.status}", status=exc.status)


class BareErrors(Wrapped):
    def failure(self, exc):
        return RuntimeError(exc.message)


class SwallowsPartial(Wrapped):
    async def _stream(self, request):
        held = []
        async for chunk in self.inner.stream(request):
            held.append(chunk)
        for chunk in held:
            yield chunk


class IgnoresCancel(Wrapped):
    async def _stream(self, request):
        try:
            async for chunk in self.inner.stream(request):
                yield chunk
        except asyncio.CancelledError:
            return


class Remote(Wrapped):
    async def _stream(self, request):
        raise ModelError("connection refused", code="NETWORK")
        yield


class OwnGuard(Wrapped):
    # A guard of its own that reads only the environment, not core's switch.
    async def _stream(self, request):
        if os.environ.get("DSH_ALLOW_MODEL_REQUESTS") == "0":
            raise ModelError("live calls are off", code="MODEL_REQUESTS_DISABLED")
        raise ModelError("connection refused", code="NETWORK")
        yield


class ConnectsFirst(Wrapped):
    # Core's guard, but only after a connection attempt (to a closed loopback port).
    async def _stream(self, request):
        probe = socket.socket()
        try:
            probe.connect(("127.0.0.1", 9))
        except OSError:
            pass
        finally:
            probe.close()
        dsh_core.check_model_request("https://192.0.2.10/chat/completions")
        raise ModelError("connection refused", code="NETWORK")
        yield


def hook(client):
    @pytest.fixture
    def scripted_client(self):
        @contextlib.contextmanager
        def make(scripts):
            yield client(scripts)
        return make
    return scripted_client


class TestNoBlockStart(ModelClientConformance):
    scripted_client = hook(NoBlockStart)


class TestWrongUsage(ModelClientConformance):
    scripted_client = hook(WrongUsage)


class TestOneSessionForAll(ModelClientConformance):
    scripted_client = hook(OneSessionForAll)


class TestBareErrors(ModelClientConformance):
    scripted_client = hook(BareErrors)


class TestOwnCodes(ModelClientConformance):
    scripted_client = hook(OwnCodes)


class TestSwallowsPartial(ModelClientConformance):
    scripted_client = hook(SwallowsPartial)
    patience = 1.0  # its hang never yields: the guard ends the cancellation test


class TestIgnoresCancel(ModelClientConformance):
    scripted_client = hook(IgnoresCancel)


class TestEchoesTheKey(ModelClientConformance):
    scripted_client = hook(Wrapped)  # the script's message, key and all, goes out as is

    @pytest.fixture
    def secret(self):
        return SECRET


class TestNoGuard(ModelClientConformance):
    scripted_client = hook(Wrapped)

    @pytest.fixture
    def remote_client(self):
        return lambda: Remote([])


class TestOwnGuard(ModelClientConformance):
    scripted_client = hook(Wrapped)

    @pytest.fixture
    def remote_client(self):
        return lambda: OwnGuard([])


class TestConnectsFirst(ModelClientConformance):
    scripted_client = hook(Wrapped)

    @pytest.fixture
    def remote_client(self):
        return lambda: ConnectsFirst([])
'''

_BREAKS = {
    ("TestNoBlockStart", "test_a_call_yields_the_chunk_union_in_order"),
    ("TestWrongUsage", "test_blocks_usage_and_finish_are_as_scripted"),
    ("TestOneSessionForAll", "test_each_session_plays_its_own_script"),
    ("TestBareErrors", "test_a_failure_is_a_model_error_with_a_code_and_the_status"),
    ("TestBareErrors", "test_each_status_means_one_code"),
    ("TestOwnCodes", "test_each_status_means_one_code"),
    # an error that is no ModelError is no failure the agent can log either
    ("TestBareErrors", "test_what_streamed_before_a_failure_is_yielded_first"),
    ("TestSwallowsPartial", "test_what_streamed_before_a_failure_is_yielded_first"),
    # holding every chunk back until the call ends also holds back a hang's partial text
    ("TestSwallowsPartial", "test_a_cancelled_call_ends_and_leaves_the_client_usable"),
    ("TestIgnoresCancel", "test_a_cancelled_call_ends_and_leaves_the_client_usable"),
    ("TestEchoesTheKey", "test_no_error_message_carries_the_key"),
    ("TestNoGuard", "test_a_remote_call_is_refused_while_live_calls_are_off"),
    ("TestNoGuard", "test_the_core_switch_refuses_a_remote_call"),
    ("TestNoGuard", "test_a_remote_call_is_refused_before_any_connection"),
    ("TestOwnGuard", "test_the_core_switch_refuses_a_remote_call"),
    ("TestConnectsFirst", "test_a_remote_call_is_refused_before_any_connection"),
}
"""Which tests each broken client fails: its own rule's, and none of the others' but where
breaking one rule breaks another by necessity (said above)."""


def test_the_suite_fails_a_client_that_breaks_each_rule(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken=_BROKEN)
    result = pytester.runpytest_inprocess("-rfE", "-p", "no:cacheprovider", "-p", "no:xdist")
    failed = {
        tuple(line.split()[1].split("::")[1:3])
        for line in result.outlines
        if line.startswith(("FAILED ", "ERROR "))
    }
    assert failed == _BREAKS


def test_chunk_union_problems_names_each_break() -> None:
    start = {"type": "block-start", "index": 0, "blockType": "text"}
    delta = {"type": "text-delta", "index": 0, "text": "a"}
    end = {"type": "block-end", "index": 0, "block": {"type": "text", "text": "a"}}
    usage = {
        "type": "usage",
        "usage": {"inputTokens": 1, "outputTokens": 1, "cacheReadTokens": 0, "reasoningTokens": 0},
    }
    finish = {"type": "finish", "reason": {"kind": "stop"}}
    assert chunk_union_problems([start, delta, end, usage, finish]) == []  # type: ignore[list-item]
    cases = {
        "before its block-start": [delta, start, end, finish],
        "expected 0": [{**start, "index": 1}, finish],
        "has no block-end": [start, delta, finish],
        "its deltas say": [start, delta, {**end, "block": {"type": "text", "text": "b"}}, finish],
        "after the finish": [start, delta, end, finish, usage],
        "ended twice": [start, delta, end, end, finish],
    }
    for expected, chunks in cases.items():
        problems = chunk_union_problems(chunks)  # type: ignore[arg-type]
        assert any(expected in p for p in problems), (expected, problems)

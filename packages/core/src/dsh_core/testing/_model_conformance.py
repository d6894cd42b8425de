"""The model client conformance suite: one set of tests every ``ModelClient`` runs.

A client package subclasses :class:`ModelClientConformance` in its own tests and overrides
one fixture, ``scripted_client``: a callable that takes scripts (one per session, each a list
of ``dsh_core`` script entries: :class:`ChunksEntry`, :class:`ThrowEntry`,
:class:`HangEntry`) and returns a context manager yielding a client that plays them, the
i-th script bound to the i-th session id that calls. A live client points itself at a
scripted model server; a replay client loads the scripts directly::

    class TestReplayConformance(ModelClientConformance):
        @pytest.fixture
        def scripted_client(self) -> ScriptedClientFactory:
            @contextlib.contextmanager
            def make(scripts):
                yield ReplayClient([script(i, s) for i, s in enumerate(scripts)])
            return make

A client that holds a key overrides ``secret`` (the key it was configured with) to get the
redaction rule; one that can reach a remote host overrides ``remote_client`` (a client
configured for a non-loopback host) to get the live-call guard's rule. The others skip them.

The rules: the chunk union (every ``block-start`` before its deltas, indices in order of first
appearance, one ``block-end`` per block carrying the concatenated deltas, ``usage`` before
``finish``, nothing after it, blocks, usage and finish reason as scripted); failures are
``ModelError`` with a code and the scripted HTTP status, after the chunks that preceded them,
and a status means one code for every client (400 ``BAD_REQUEST``, 401 ``AUTH``, 402 ``QUOTA``,
429 ``RATE_LIMIT``, 500 ``SERVER``); a cancelled call ends with ``CancelledError`` and leaves
the client usable; no error message carries the key; with live calls off
(``DSH_ALLOW_MODEL_REQUESTS=0``, or core's own ``dsh_core.ALLOW_MODEL_REQUESTS = False``: every
client goes through core's one guard, :func:`dsh_core.check_model_request`), a remote call is
refused with ``MODEL_REQUESTS_DISABLED`` before any socket of the process tries to connect.
:func:`chunk_union_problems` is the first rule as a function.

This module imports pytest; ``dsh_core.testing`` imports it lazily.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

import dsh_core
from dsh_core._events import Chunk, ContentBlock
from dsh_core._model import ALLOW_MODEL_REQUESTS_ENV, ModelClient, ModelError, ModelRequest
from dsh_core._script_player import ChunksEntry, HangEntry, ScriptEntry, ThrowEntry
from dsh_core.testing._sockets import connect_attempts

__all__ = ["ModelClientConformance", "ScriptedClientFactory", "chunk_union_problems"]

ScriptedClientFactory = Callable[
    [Sequence[Sequence[ScriptEntry]]], contextlib.AbstractContextManager[ModelClient]
]
"""Scripts, one per session → a context manager yielding a client that plays them."""

_CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")

_USER: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def _text(index: int, words: Sequence[str]) -> list[Chunk]:
    chunks: list[Chunk] = [{"type": "block-start", "index": index, "blockType": "text"}]
    for word in words:
        chunks.append({"type": "text-delta", "index": index, "text": word})
    return chunks


FULL_ANSWER: tuple[Chunk, ...] = (
    {"type": "block-start", "index": 0, "blockType": "reasoning"},
    {"type": "reasoning-delta", "index": 0, "text": "Let me "},
    {"type": "reasoning-delta", "index": 0, "text": "think."},
    *_text(1, ["I'll ", "look."]),
    {"type": "block-start", "index": 2, "blockType": "tool-call"},
    {"type": "tool-call-delta", "index": 2, "id": "call_1", "name": "bash", "argumentsDelta": ""},
    {
        "type": "tool-call-delta",
        "index": 2,
        "id": "call_1",
        "name": "bash",
        "argumentsDelta": '{"command": "ls"}',
    },
    {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "Let me think."}},
    {"type": "block-end", "index": 1, "block": {"type": "text", "text": "I'll look."}},
    {
        "type": "block-end",
        "index": 2,
        "block": {
            "type": "tool-call",
            "id": "call_1",
            "name": "bash",
            "arguments": '{"command": "ls"}',
        },
    },
    {
        "type": "usage",
        "usage": {"inputTokens": 7, "outputTokens": 5, "cacheReadTokens": 2, "reasoningTokens": 3},
    },
    {"type": "finish", "reason": {"kind": "tool-calls"}},
)
"""Reasoning, text and a tool call, usage and a finish: every kind the union has."""

SHORT_ANSWER: tuple[Chunk, ...] = (
    *_text(0, ["o", "k"]),
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "ok"}},
    {"type": "finish", "reason": {"kind": "stop"}},
)


STATUS_CODES: dict[int, str] = {
    400: "BAD_REQUEST",
    401: "AUTH",
    402: "QUOTA",
    429: "RATE_LIMIT",
    500: "SERVER",
}
"""The ``ModelError.code`` of a failed call's HTTP status, the same for every client."""


def _delta_text(chunk: Chunk) -> str:
    if chunk["type"] in ("text-delta", "reasoning-delta"):
        return str(chunk.get("text", ""))
    if chunk["type"] == "tool-call-delta":
        return str(chunk.get("argumentsDelta", ""))
    return ""


def chunk_union_problems(chunks: Sequence[Chunk]) -> list[str]:
    """What breaks the chunk union's ordering rules in one call's chunks (empty: none).

    The rules: a block's ``block-start`` comes before its deltas; blocks are numbered 0, 1, …
    in order of first appearance; each started block has one ``block-end`` whose content is
    its deltas joined, after them; ``usage`` comes before ``finish``; ``finish`` is last and
    appears once.
    """
    problems: list[str] = []
    kinds: dict[int, str] = {}
    parts: dict[int, list[str]] = {}
    ended: dict[int, ContentBlock] = {}
    finished_at: int | None = None
    usage_at: int | None = None
    for position, chunk in enumerate(chunks):
        where = f"chunk {position} ({chunk['type']})"
        if finished_at is not None:
            problems.append(f"{where} comes after the finish")
        index = chunk.get("index")
        if chunk["type"] == "block-start":
            assert isinstance(index, int)
            if index != len(kinds):
                problems.append(f"{where} opens block {index}, expected {len(kinds)}")
            kinds[index] = str(chunk.get("blockType"))
            parts[index] = []
        elif chunk["type"] in ("text-delta", "reasoning-delta", "tool-call-delta"):
            assert isinstance(index, int)
            if index not in kinds:
                problems.append(f"{where} for block {index} before its block-start")
            elif index in ended:
                problems.append(f"{where} for block {index} after its block-end")
            else:
                parts[index].append(_delta_text(chunk))
        elif chunk["type"] == "block-end":
            assert isinstance(index, int)
            if index not in kinds:
                problems.append(f"{where} for block {index}, which never started")
                continue
            if index in ended:
                problems.append(f"{where}: block {index} ended twice")
            block: Any = chunk.get("block")
            ended[index] = block
            joined = "".join(parts[index])
            text = block.get("arguments") if kinds[index] == "tool-call" else block.get("text")
            if block.get("type") != kinds[index] or text != joined:
                problems.append(f"{where}: block {index} is {block!r}, its deltas say {joined!r}")
        elif chunk["type"] == "usage":
            usage_at = position
        elif chunk["type"] == "finish":
            finished_at = position
    for index in kinds:
        if index not in ended:
            problems.append(f"block {index} has no block-end")
    if finished_at is not None and usage_at is not None and usage_at > finished_at:
        problems.append("usage comes after the finish")
    return problems


def _blocks(chunks: Sequence[Chunk]) -> list[Any]:
    return [c.get("block") for c in chunks if c["type"] == "block-end"]


def _of_type(chunks: Sequence[Chunk], kind: str) -> list[Chunk]:
    return [c for c in chunks if c["type"] == kind]


async def _drain(stream: AsyncIterator[Chunk], into: list[Chunk]) -> None:
    async for chunk in stream:
        into.append(chunk)


def _run_call(
    client: ModelClient, session: str, into: list[Chunk], patience: float
) -> BaseException | None:
    """One ``stream()`` call to the end: ``None``, or what it raised (after ``into`` filled)."""

    async def call() -> None:
        try:
            async with asyncio.timeout(patience):
                await _drain(client.stream(ModelRequest(session, list(_USER))), into)
        finally:
            await client.aclose()

    try:
        asyncio.run(call())
    except (ModelError, TimeoutError) as exc:
        return exc
    return None


class ModelClientConformance:
    """Tests every :class:`~dsh_core.ModelClient` must pass.

    Subclass it (the class name must start with ``Test``) and override ``scripted_client``;
    override ``secret`` and ``remote_client`` where the client has them.

    Attributes:
        patience: seconds a test waits for a call before it fails it as hung (a guard, never
            a measure of speed).
    """

    patience: float = 30.0

    # --- fixtures ------------------------------------------------------------------------------

    @pytest.fixture
    def scripted_client(self) -> ScriptedClientFactory:
        """Return a callable: scripts, one per session → a context manager yielding a client
        that plays them (the i-th script bound to the i-th new session id)."""
        raise NotImplementedError("a client's conformance test overrides scripted_client")

    @pytest.fixture
    def secret(self) -> str | None:
        """The key the scripted client is configured with (``None``: it holds none)."""
        return None

    @pytest.fixture
    def remote_client(self) -> Callable[[], ModelClient] | None:
        """Makes a client configured for a non-loopback host (``None``: it reaches none)."""
        return None

    # --- the chunk union -----------------------------------------------------------------------

    def test_a_call_yields_the_chunk_union_in_order(
        self, scripted_client: ScriptedClientFactory
    ) -> None:
        chunks: list[Chunk] = []
        with scripted_client([[ChunksEntry(FULL_ANSWER)]]) as client:
            failure = _run_call(client, "s1", chunks, self.patience)
        assert failure is None, f"the call failed: {failure!r}"
        assert chunk_union_problems(chunks) == []
        assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}

    def test_blocks_usage_and_finish_are_as_scripted(
        self, scripted_client: ScriptedClientFactory
    ) -> None:
        chunks: list[Chunk] = []
        with scripted_client([[ChunksEntry(FULL_ANSWER)]]) as client:
            assert _run_call(client, "s1", chunks, self.patience) is None
        assert _blocks(chunks) == _blocks(FULL_ANSWER)
        assert _of_type(chunks, "usage") == _of_type(FULL_ANSWER, "usage")
        assert _of_type(chunks, "finish") == _of_type(FULL_ANSWER, "finish")

    def test_each_session_plays_its_own_script(
        self, scripted_client: ScriptedClientFactory
    ) -> None:
        first: list[Chunk] = []
        second: list[Chunk] = []
        with scripted_client([[ChunksEntry(SHORT_ANSWER)], [ChunksEntry(FULL_ANSWER)]]) as client:

            async def both() -> None:
                try:
                    async with asyncio.timeout(self.patience):
                        await _drain(client.stream(ModelRequest("s1", list(_USER))), first)
                        await _drain(client.stream(ModelRequest("s2", list(_USER))), second)
                finally:
                    await client.aclose()

            asyncio.run(both())
        assert _blocks(first) == _blocks(SHORT_ANSWER)
        assert _blocks(second) == _blocks(FULL_ANSWER)

    # --- failures --------------------------------------------------------------------------------

    def test_a_failure_is_a_model_error_with_a_code_and_the_status(
        self, scripted_client: ScriptedClientFactory
    ) -> None:
        entry = ThrowEntry((), "the scripted failure", "BAD_REQUEST", 400)
        with scripted_client([[entry]]) as client:
            failure = _run_call(client, "s1", [], self.patience)
        assert isinstance(failure, ModelError), f"expected a ModelError, got {failure!r}"
        assert failure.code is not None
        assert _CODE.match(failure.code), f"code {failure.code!r} is not an UPPER_SNAKE word"
        assert failure.status == 400
        assert "\n" not in failure.message

    def test_each_status_means_one_code(self, scripted_client: ScriptedClientFactory) -> None:
        # What the agent logs and a replay compares: every client names a status alike (a
        # replay repeats the recorded code; a live client maps the HTTP status to it).
        problems: list[str] = []
        for status, code in STATUS_CODES.items():
            entry = ThrowEntry((), f"failed with {status}", code, status)
            with scripted_client([[entry]]) as client:
                failure = _run_call(client, "s1", [], self.patience)
            got = (failure.code, failure.status) if isinstance(failure, ModelError) else failure
            if got != (code, status):
                problems.append(f"HTTP {status} should be {code}, got {got!r}")
        assert problems == []

    def test_what_streamed_before_a_failure_is_yielded_first(
        self, scripted_client: ScriptedClientFactory
    ) -> None:
        partial = tuple(_text(0, ["par", "tial"]))
        chunks: list[Chunk] = []
        entry = ThrowEntry(partial, "broke mid-stream", "SERVER", 500)
        with scripted_client([[entry]]) as client:
            failure = _run_call(client, "s1", chunks, self.patience)
        assert isinstance(failure, ModelError), f"expected a ModelError, got {failure!r}"
        assert [_delta_text(c) for c in _of_type(chunks, "text-delta")] == ["par", "tial"]
        assert _of_type(chunks, "finish") == []

    # --- cancellation ----------------------------------------------------------------------------

    def test_a_cancelled_call_ends_and_leaves_the_client_usable(
        self, scripted_client: ScriptedClientFactory
    ) -> None:
        after: list[Chunk] = []
        outcome: list[BaseException | None] = []
        with scripted_client([[HangEntry(), ChunksEntry(SHORT_ANSWER)]]) as client:

            async def scenario() -> None:
                try:
                    async with asyncio.timeout(self.patience):
                        started = asyncio.Event()

                        async def hang() -> None:
                            async for _ in client.stream(ModelRequest("s1", list(_USER))):
                                started.set()

                        task = asyncio.create_task(hang())
                        await started.wait()
                        task.cancel()
                        try:
                            await task
                        except asyncio.CancelledError as exc:
                            outcome.append(exc)
                        else:
                            outcome.append(None)
                        await _drain(client.stream(ModelRequest("s1", list(_USER))), after)
                finally:
                    await client.aclose()

            asyncio.run(scenario())
        assert outcome, "the cancelled call never ended"
        assert isinstance(outcome[0], asyncio.CancelledError), outcome
        assert _blocks(after) == _blocks(SHORT_ANSWER)

    # --- secrets and live calls --------------------------------------------------------------

    def test_no_error_message_carries_the_key(
        self, scripted_client: ScriptedClientFactory, secret: str | None
    ) -> None:
        if secret is None:
            pytest.skip("this client holds no key")
        entry = ThrowEntry((), f"invalid key {secret} (echoed by the provider)", None, 401)
        with scripted_client([[entry]]) as client:
            failure = _run_call(client, "s1", [], self.patience)
        assert isinstance(failure, ModelError), f"expected a ModelError, got {failure!r}"
        assert secret not in failure.message
        assert secret not in str(failure)
        assert secret not in repr(client)

    def test_a_remote_call_is_refused_while_live_calls_are_off(
        self,
        remote_client: Callable[[], ModelClient] | None,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")
        self._assert_refused(remote_client)

    def test_the_core_switch_refuses_a_remote_call(
        self,
        remote_client: Callable[[], ModelClient] | None,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        # One guard for every provider: a client that keeps its own (reading only the
        # environment) would not honour dsh_core.ALLOW_MODEL_REQUESTS.
        monkeypatch.delenv(ALLOW_MODEL_REQUESTS_ENV, raising=False)
        monkeypatch.setattr(dsh_core, "ALLOW_MODEL_REQUESTS", False)
        message = self._assert_refused(remote_client)
        assert "dsh_core.ALLOW_MODEL_REQUESTS" in message

    def test_a_remote_call_is_refused_before_any_connection(
        self,
        remote_client: Callable[[], ModelClient] | None,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        # A refusal after the connection (or a probe of the host) has already left the
        # machine: the guard must come first.
        monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")
        with connect_attempts() as attempts:
            self._assert_refused(remote_client)
        assert attempts == [], f"the refused call first tried to connect to {attempts}"

    def _assert_refused(self, remote_client: Callable[[], ModelClient] | None) -> str:
        """A call of a remote client fails as MODEL_REQUESTS_DISABLED; returns the message."""
        if remote_client is None:
            pytest.skip("this client reaches no remote host")
        failure = _run_call(remote_client(), "s1", [], self.patience)
        assert isinstance(failure, ModelError), f"expected a ModelError, got {failure!r}"
        assert failure.code == "MODEL_REQUESTS_DISABLED"
        return failure.message

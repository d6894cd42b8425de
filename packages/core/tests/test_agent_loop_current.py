"""The ``current`` loop profile, against upstream's later agent-loop specs.

Cases ported from ``head/packages/core/agent-loop/tests/tool-calls.spec.ts`` (the scheduler)
and ``loop.spec.ts`` (max-tokens), with the ``june`` profile alongside where the two differ.
Cases about registry changes mid-step, pre/post-execute middleware and additional contexts
are not applicable: our tools are fixed for an agent's life and have no middleware.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from dsh_core import (
    DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    Agent,
    AgentConfig,
    Chunk,
    CreateOptions,
    LoopProfile,
    Session,
    SessionMeta,
    Tool,
    ToolContext,
    ToolOutcome,
    ToolSpec,
    is_parallel_safe,
    loop_behaviour,
    messages_from_events,
)
from dsh_core.testing import InMemorySessionStore, ScriptedModel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Gated:
    """A tool whose calls wait until the test releases them by id (``isConcurrencySafe``
    when ``parallel``)."""

    def __init__(self, name: str, *, parallel: bool) -> None:
        self.name = name
        self.parallel_safe = parallel
        self.started: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description="gated", parameters={"type": "object"})

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        key = str(arguments["id"])
        self.started.append(key)
        gate = self.gates.setdefault(key, asyncio.Event())
        await gate.wait()
        return ToolOutcome(f"done-{key}")

    def release(self, key: str) -> None:
        self.gates.setdefault(key, asyncio.Event()).set()


class _Recording:
    """A tool that only records start and end (no await in between)."""

    def __init__(self, name: str, order: list[str], *, parallel: bool) -> None:
        self.name = name
        self.order = order
        self.parallel_safe = parallel

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description="records", parameters={"type": "object"})

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        self.order.append(f"{self.name}-start-{arguments['id']}")
        await asyncio.sleep(0)
        self.order.append(f"{self.name}-end-{arguments['id']}")
        return ToolOutcome(self.name)


def _calls(*calls: tuple[str, str, str]) -> list[Chunk]:
    chunks: list[Chunk] = []
    for index, (call_id, name, key) in enumerate(calls):
        arguments = json.dumps({"id": key})
        chunks.append({"type": "block-start", "index": index, "blockType": "tool-call"})
        chunks.append(
            {
                "type": "block-end",
                "index": index,
                "block": {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments},
            }
        )
    chunks.append({"type": "finish", "reason": {"kind": "tool-calls"}})
    return chunks


def _text(text: str, finish: str = "stop") -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": finish}},  # type: ignore[typeddict-item]
    ]


def _setup(
    script: list[Any], tools: list[Tool], **config: Any
) -> tuple[Agent, Session, ScriptedModel]:
    store = InMemorySessionStore()
    model = ScriptedModel([script])
    agent = Agent(model, store, tools, AgentConfig(**config))
    return agent, store.create(CreateOptions(meta=SessionMeta(cwd="/w"))), model


def _tool_events(session: Session) -> list[str]:
    return [f"{e.type}:{e.data['callId']}" for e in session.events if e.type.startswith("tool/")]


def _results(session: Session) -> list[str]:
    return [e.data["callId"] for e in session.events if e.type == "tool/result"]


async def _until(predicate: Callable[[], bool]) -> None:
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("until: the condition never held")


# --- tool-calls.spec.ts: grouping and barriers ---------------------------------------------------


async def test_parallel_safe_siblings_all_start_before_any_completes() -> None:
    gated = _Gated("p", parallel=True)
    agent, session, _ = _setup(
        [_calls(("c1", "p", "1"), ("c2", "p", "2"), ("c3", "p", "3")), _text("done")], [gated]
    )
    turn = asyncio.create_task(agent.run_turn(session, "go"))
    await _until(lambda: len(gated.started) == 3)
    assert gated.started == ["1", "2", "3"]
    assert _results(session) == []
    for key in ("1", "2", "3"):
        gated.release(key)
    assert (await turn).kind == "completed"
    assert _tool_events(session) == [
        "tool/call:c1",
        "tool/call:c2",
        "tool/call:c3",
        "tool/result:c1",
        "tool/result:c2",
        "tool/result:c3",
    ]


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        # An exclusive call between two parallel-safe calls forms a barrier (3 groups).
        ("current", ["r-start-A1", "r-end-A1", "w-start-A2", "w-end-A2", "r-start-A3", "r-end-A3"]),
        ("june", ["r-start-A1", "r-end-A1", "w-start-A2", "w-end-A2", "r-start-A3", "r-end-A3"]),
    ],
)
async def test_an_exclusive_call_is_a_barrier(profile: LoopProfile, expected: list[str]) -> None:
    order: list[str] = []
    tools: list[Tool] = [
        _Recording("r", order, parallel=True),
        _Recording("w", order, parallel=False),
    ]
    agent, session, _ = _setup(
        [_calls(("c1", "r", "A1"), ("c2", "w", "A2"), ("c3", "r", "A3")), _text("done")],
        tools,
        profile=profile,
    )
    await agent.run_turn(session, "go")
    assert order == expected


async def test_two_parallel_calls_overlap_only_under_current() -> None:
    for profile, overlapped in (("current", True), ("june", False)):
        order: list[str] = []
        agent, session, _ = _setup(
            [_calls(("c1", "r", "1"), ("c2", "r", "2")), _text("done")],
            [_Recording("r", order, parallel=True)],
            profile=profile,
        )
        await agent.run_turn(session, "go")
        assert (order[1] == "r-start-2") is overlapped, profile


# --- model-order results despite out-of-order settlement ----------------------------------------


async def test_results_commit_in_model_order_when_a_later_call_settles_first() -> None:
    gated = _Gated("p", parallel=True)
    agent, session, _ = _setup([_calls(("c1", "p", "1"), ("c2", "p", "2")), _text("done")], [gated])
    turn = asyncio.create_task(agent.run_turn(session, "go"))
    await _until(lambda: len(gated.started) == 2)
    gated.release("2")
    for _ in range(20):
        await asyncio.sleep(0)
    assert _results(session) == []
    gated.release("1")
    await turn
    assert _results(session) == ["c1", "c2"]
    # Derived history pairs calls in model order too.
    tool_messages = [m for m in messages_from_events(session.events) if m["role"] == "tool"]
    assert [m["callId"] for m in tool_messages] == ["c1", "c2"]  # type: ignore[typeddict-item]


# --- rolling pool honours max_parallel_tool_calls ----------------------------------------------


@pytest.mark.parametrize("bad", [0, -1])
def test_an_invalid_cap_is_rejected(bad: int) -> None:
    with pytest.raises(ValueError, match="max_parallel_tool_calls must be at least 1"):
        Agent(ScriptedModel(), InMemorySessionStore(), [], AgentConfig(max_parallel_tool_calls=bad))


def test_the_cap_defaults_to_upstreams() -> None:
    assert AgentConfig().max_parallel_tool_calls == DEFAULT_MAX_PARALLEL_TOOL_CALLS == 10
    assert AgentConfig().profile == "current"


async def test_the_pool_starts_at_most_the_cap_and_replenishes_as_calls_settle() -> None:
    gated = _Gated("p", parallel=True)
    calls = [(f"c{n}", "p", str(n)) for n in (1, 2, 3, 4)]
    agent, session, _ = _setup([_calls(*calls), _text("done")], [gated], max_parallel_tool_calls=2)
    turn = asyncio.create_task(agent.run_turn(session, "go"))
    await _until(lambda: len(gated.started) == 2)
    for _ in range(20):
        await asyncio.sleep(0)
    assert gated.started == ["1", "2"]
    gated.release("1")
    await _until(lambda: len(gated.started) == 3)
    assert _tool_events(session)[:4] == [
        "tool/call:c1",
        "tool/call:c2",
        "tool/result:c1",
        "tool/call:c3",
    ]
    gated.release("2")
    gated.release("3")
    await _until(lambda: len(gated.started) == 4)
    gated.release("4")
    await turn
    assert _results(session) == ["c1", "c2", "c3", "c4"]


async def test_a_cap_of_one_is_fully_serial() -> None:
    gated = _Gated("p", parallel=True)
    agent, session, _ = _setup(
        [_calls(("c1", "p", "1"), ("c2", "p", "2")), _text("done")],
        [gated],
        max_parallel_tool_calls=1,
    )
    turn = asyncio.create_task(agent.run_turn(session, "go"))
    await _until(lambda: len(gated.started) == 1)
    for _ in range(20):
        await asyncio.sleep(0)
    assert gated.started == ["1"]
    gated.release("1")
    await _until(lambda: len(gated.started) == 2)
    gated.release("2")
    await turn
    assert _tool_events(session) == [
        "tool/call:c1",
        "tool/result:c1",
        "tool/call:c2",
        "tool/result:c2",
    ]


# --- abort handling ------------------------------------------------------------------------------


async def test_cancel_commits_started_calls_and_skips_the_rest_in_model_order() -> None:
    gated = _Gated("p", parallel=True)
    barrier = _Recording("w", [], parallel=False)
    agent, session, _ = _setup(
        [_calls(("c1", "p", "1"), ("c2", "p", "2"), ("c3", "p", "3"), ("c4", "w", "4"))],
        [gated, barrier],
        max_parallel_tool_calls=2,
    )
    turn = asyncio.create_task(agent.run_turn(session, "go"))
    await _until(lambda: len(gated.started) == 2)
    gated.release("2")  # settles, but cannot commit before c1; the pool starts c3
    await _until(lambda: len(gated.started) == 3)
    turn.cancel()
    outcome = await turn
    assert outcome.kind == "aborted"
    assert barrier.order == []  # no exclusive barrier runs after the group aborted
    results = {e.data["callId"]: e.data for e in session.events if e.type == "tool/result"}
    assert list(results) == ["c1", "c2", "c3", "c4"]
    texts = {call: result["content"][0]["text"] for call, result in results.items()}
    assert texts == {
        "c1": "cancelled",
        "c2": "done-2",  # settled before the cancel: its real result
        "c3": "cancelled",
        "c4": "cancelled before dispatch",
    }
    assert [e.data["callId"] for e in session.events if e.type == "tool/call"] == [
        "c1",
        "c2",
        "c3",
        "c4",
    ]
    assert session.events[-1].data["reason"]["kind"] == "aborted"


# --- loop.spec.ts: max-tokens ------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["current", "june"])
async def test_a_max_tokens_step_with_a_tool_call(profile: LoopProfile) -> None:
    # Upstream (June's loop.ts and later): truncated tool calls are dropped and never
    # dispatched; with no content and no usage left, no assistant/message is logged.
    order: list[str] = []
    truncated = _calls(("c1", "echo", "x"))
    truncated[-1] = {"type": "finish", "reason": {"kind": "max-tokens"}}
    agent, session, model = _setup(
        [truncated, _text("after")], [_Recording("echo", order, parallel=False)], profile=profile
    )
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "max-tokens"
    assert order == []
    assert not any(e.type == "assistant/message" for e in session.events)
    assert len(model.requests) == 1


@pytest.mark.parametrize("profile", ["current", "june"])
async def test_a_cut_off_text_step_ends_the_turn_max_tokens(profile: LoopProfile) -> None:
    agent, session, model = _setup([_text("truncat", "max-tokens")], [], profile=profile)
    outcome = await agent.run_turn(session, "go")
    assert (outcome.kind, outcome.final_text, len(model.requests)) == ("max-tokens", "truncat", 1)


async def test_current_keeps_safe_text_of_a_max_tokens_step_and_drops_the_call() -> None:
    chunks: list[Chunk] = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "partial text"}},
        *_calls(("c1", "echo", "x"))[:-1],
        {"type": "finish", "reason": {"kind": "max-tokens"}},
    ]
    agent, session, _ = _setup([chunks], [_Recording("echo", [], parallel=False)])
    await agent.run_turn(session, "go")
    assert not any(e.type == "tool/call" for e in session.events)
    assert [m["content"] for m in messages_from_events(session.events)][1] == [
        {"type": "text", "text": "partial text"}
    ]


def test_profiles_are_spelled_out() -> None:
    current, june = loop_behaviour("current"), loop_behaviour("june")
    assert (current.concurrent_tools, current.empty_response_retries) == (True, 5)
    assert (current.max_delegation_depth, june.max_delegation_depth) == (3, 1)
    assert (june.concurrent_tools, june.empty_response_retries) == (False, 0)
    with pytest.raises(ValueError, match="unknown loop profile 'july'"):
        loop_behaviour("july")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown loop profile"):
        Agent(ScriptedModel(), InMemorySessionStore(), [], AgentConfig(profile="july"))  # type: ignore[arg-type]
    assert is_parallel_safe(_Gated("g", parallel=True))
    assert not is_parallel_safe(_Recording("r", [], parallel=False))


# --- empty completions (llm-deepseek translate.ts + agent.ts request-error retry) -------------

_EMPTY_STOP: list[Chunk] = [{"type": "finish", "reason": {"kind": "stop"}}]
_EMPTY_ERROR: list[Chunk] = [
    {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 0}},
    {
        "type": "finish",
        "reason": {"kind": "error", "failure": {"message": "empty", "code": "EMPTY_RESPONSE"}},  # type: ignore[typeddict-item]
    },
]


@pytest.mark.parametrize(
    ("profile", "script", "kind", "text", "calls", "code"),
    [
        # current: an empty completion is retried in the same step, then the answer counts.
        ("current", [_EMPTY_STOP, _text("ok")], "completed", "ok", 2, None),
        ("current", [_EMPTY_ERROR, _EMPTY_STOP, _text("ok")], "completed", "ok", 3, None),
        # Five retries, then the turn fails with upstream's code.
        ("current", [_EMPTY_STOP] * 6, "error", "", 6, "EMPTY_RESPONSE"),
        # june: the empty completion stands (a completed turn with no text) …
        ("june", [_EMPTY_STOP, _text("unused")], "completed", "", 1, None),
        # … and a provider's error finish ends the turn with the provider's code.
        ("june", [_EMPTY_ERROR, _text("unused")], "error", "", 1, "EMPTY_RESPONSE"),
    ],
)
async def test_empty_completions(
    profile: LoopProfile,
    script: list[Any],
    kind: str,
    text: str,
    calls: int,
    code: str | None,
) -> None:
    agent, session, model = _setup(script, [], profile=profile)
    outcome = await agent.run_turn(session, "go")
    assert (outcome.kind, outcome.final_text, len(model.requests)) == (kind, text, calls)
    assert (outcome.error.code if outcome.error else None) == code
    # Every attempt is its own call in the same step; only the answer is a message.
    assert {(r.turn, r.step) for r in model.requests} == {(1, 1)}
    finishes = [
        e
        for e in session.events
        if e.type == "assistant/chunk" and e.data["chunk"]["type"] == "finish"
    ]
    assert len(finishes) == calls
    messages = [e for e in session.events if e.type == "assistant/message"]
    # A failed attempt leaves no message, nor does an empty one with no usage.
    assert len(messages) == (1 if kind == "completed" and text else 0)


async def test_max_tokens_does_not_leak_into_the_next_turn() -> None:
    agent, session, _ = _setup([_text("cut", "max-tokens"), _text("clean")], [])
    first = await agent.run_turn(session, "first")
    second = await agent.run_turn(session, "second")
    assert (first.kind, second.kind) == ("max-tokens", "completed")

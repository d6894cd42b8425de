"""The agent loop's own rules: tool failures, limits, errors, listener, flushes, cancels."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    Chunk,
    CreateOptions,
    Event,
    HangEntry,
    ModelRequest,
    RequestConfig,
    Session,
    SessionMeta,
    ThrowEntry,
    ToolContext,
    ToolOutcome,
    ToolSpec,
    next_turn_number,
    turn_end,
    turn_start,
)
from dsh_core.testing import SCRIPTED_REQUEST_CONFIG, InMemorySessionStore, ScriptedModel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _text(text: str, finish: str = "stop") -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {
            "type": "usage",
            "usage": {
                "inputTokens": 1,
                "outputTokens": 1,
                "cacheReadTokens": 0,
                "reasoningTokens": 0,
            },
        },
        {"type": "finish", "reason": {"kind": finish}},  # type: ignore[typeddict-item]
    ]


def _calls(*calls: tuple[str, str, str]) -> list[Chunk]:
    chunks: list[Chunk] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        chunks.append({"type": "block-start", "index": index, "blockType": "tool-call"})
        chunks.append(
            {
                "type": "tool-call-delta",
                "index": index,
                "id": call_id,
                "name": name,
                "argumentsDelta": arguments,
            }
        )
        chunks.append(
            {
                "type": "block-end",
                "index": index,
                "block": {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments},
            }
        )
    chunks.append({"type": "finish", "reason": {"kind": "tool-calls"}})
    return chunks


class _Echo:
    """Returns its ``text`` argument; records the stored log it saw when it ran."""

    def __init__(self, store: InMemorySessionStore) -> None:
        self.store = store
        self.seen_stored: list[list[str]] = []  # callIds of the durable tool/call events

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name="echo", description="echo", parameters={"type": "object"})

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        stored = self.store.load(context.session.id).events
        self.seen_stored.append([e.data["callId"] for e in stored if e.type == "tool/call"])
        return ToolOutcome(str(arguments.get("text", "")))


class _Boom:
    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name="boom", description="raises", parameters={"type": "object"})

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        raise RuntimeError("kaput")


class _Forever:
    def __init__(self) -> None:
        self.started = asyncio.Event()

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name="forever", description="waits", parameters={"type": "object"})

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        self.started.set()
        await asyncio.get_running_loop().create_future()
        raise AssertionError("unreachable")


def _setup(
    script: Sequence[Any],
    tools: Sequence[Any] = (),
    config: AgentConfig | None = None,
) -> tuple[Agent, InMemorySessionStore, Session, ScriptedModel]:
    store = InMemorySessionStore()
    model = ScriptedModel([list(script)])
    agent = Agent(model, store, list(tools), config or AgentConfig())
    return agent, store, store.create(CreateOptions(meta=SessionMeta(cwd="/"))), model


class _BrokenModel:
    """A model client whose stream fails with something other than a ``ModelError``."""

    @property
    def request_config(self) -> RequestConfig:
        return SCRIPTED_REQUEST_CONFIG

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        for chunk in ():
            yield chunk
        raise ValueError("bad frame")

    async def aclose(self) -> None:
        pass


def _of(session: Session, kind: str) -> list[dict[str, Any]]:
    return [event.data for event in session.events if event.type == kind]


def _types(session: Session) -> list[str]:
    return [event.type for event in session.events if event.type != "assistant/chunk"]


async def test_unknown_tool_is_an_error_result_and_the_turn_goes_on() -> None:
    agent, _, session, _ = _setup([_calls(("c1", "nope", "{}")), _text("ok")])
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "completed"
    assert outcome.final_text == "ok"
    [result] = _of(session, "tool/result")
    assert result["isError"] is True
    assert result["callId"] == "c1"
    assert result["content"][0]["text"] == 'Error: unknown tool "nope"'
    assert result["error"] == {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("{not json", 'Error: invalid arguments: "arguments" must be an object'),
        ("[1, 2]", 'Error: invalid arguments: "arguments" must be an object'),
    ],
)
async def test_bad_arguments_are_an_error_result(arguments: str, expected: str) -> None:
    agent, store, session, _ = _setup([_calls(("c1", "echo", arguments)), _text("ok")])
    echo = _Echo(store)
    agent = Agent(agent.model, store, [echo])
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "completed"
    [call] = _of(session, "tool/call")
    assert call["arguments"] == arguments
    [result] = _of(session, "tool/result")
    assert result["isError"] is True
    assert expected in result["content"][0]["text"]
    assert echo.seen_stored == []


async def test_a_raising_tool_is_an_error_result() -> None:
    agent, _, session, _ = _setup([_calls(("c1", "boom", "")), _text("ok")], [_Boom()])
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "completed"
    [result] = _of(session, "tool/result")
    assert result == {
        "turn": 1,
        "step": 1,
        "callId": "c1",
        "isError": True,
        "content": [{"type": "text", "text": "Error: kaput"}],
    }


async def test_tools_run_in_order_after_a_flush_and_results_follow_calls() -> None:
    store = InMemorySessionStore()
    echo = _Echo(store)
    script = [_calls(("a", "echo", '{"text": "A"}'), ("b", "echo", '{"text": "B"}')), _text("done")]
    agent = Agent(ScriptedModel([script]), store, [echo])
    session = store.create(CreateOptions())
    outcome = await agent.run_turn(session, "go")
    assert outcome == outcome.__class__(1, "completed", "done")
    assert _types(session) == [
        "turn/start",
        "user/message",
        "step/start",
        "request/header",  # the first call only: the second step's header is the same
        "assistant/message",
        "tool/call",
        "tool/result",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    assert [r["content"][0]["text"] for r in _of(session, "tool/result")] == ["A", "B"]
    # Each tool saw its own tool/call already durable.
    assert echo.seen_stored == [["a"], ["a", "b"]]
    assert store.load(session.id).events == list(session.events)


async def test_step_limit_ends_the_turn_with_an_error() -> None:
    loop = _calls(("c", "echo", "{}"))
    store = InMemorySessionStore()
    agent = Agent(
        ScriptedModel([[loop, loop, loop]]), store, [_Echo(store)], AgentConfig(max_steps=3)
    )
    session = store.create(CreateOptions())
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "error"
    assert outcome.error is not None
    assert outcome.error.code == "STEP_LIMIT"
    assert session.events[-1].data == {
        "turn": 1,
        "reason": {
            "kind": "error",
            "step": 3,
            "message": "step limit of 3 reached",
            "code": "STEP_LIMIT",
        },
    }
    assert session.events[-2].type == "step/end"
    assert len(_of(session, "step/start")) == 3


async def test_max_tokens_finish_ends_the_turn_as_max_tokens() -> None:
    agent, _, session, _ = _setup([_text("trunc", finish="max-tokens")])
    outcome = await agent.run_turn(session, "go")
    assert (outcome.kind, outcome.final_text) == ("max-tokens", "trunc")
    assert session.events[-1].data["reason"] == {"kind": "max-tokens"}


async def test_model_error_mid_stream_keeps_partial_chunks() -> None:
    partial = _text("half")[:2]
    agent, store, session, _ = _setup([ThrowEntry(tuple(partial), "rate limited", "RATE")])
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "error"
    assert outcome.error is not None
    assert outcome.error.code == "RATE"
    stored = store.load(session.id).events
    assert [e.data["chunk"] for e in stored if e.type == "assistant/chunk"] == partial
    assert [e.type for e in stored][-4:] == [
        "assistant/chunk",
        "assistant/chunk",
        "step/end",
        "turn/end",
    ]
    assert stored[-1].data == {
        "turn": 1,
        "reason": {"kind": "error", "step": 1, "message": "rate limited", "code": "RATE"},
    }


async def test_model_error_without_code_omits_it() -> None:
    agent, _, session, _ = _setup([ThrowEntry((), "no code")])
    await agent.run_turn(session, "go")
    assert session.events[-1].data["reason"] == {"kind": "error", "step": 1, "message": "no code"}


async def test_any_other_model_failure_is_internal() -> None:
    store = InMemorySessionStore()
    agent = Agent(_BrokenModel(), store, [], AgentConfig())
    session = store.create(CreateOptions(meta=SessionMeta(cwd="/")))
    outcome = await agent.run_turn(session, "go")
    assert outcome.error is not None
    assert session.events[-1].data["reason"] == {
        "kind": "error",
        "step": 1,
        "message": "ValueError: bad frame",
        "code": "INTERNAL",
    }


async def test_a_stream_without_finish_is_an_error() -> None:
    agent, _, session, _ = _setup([_text("x")[:3]])
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "error"
    assert "without a finish chunk" in session.events[-1].data["reason"]["message"]
    assert "assistant/message" not in _types(session)


async def test_listener_sees_every_event_in_order() -> None:
    store = InMemorySessionStore()
    seen: list[Event] = []
    agent = Agent(
        ScriptedModel([[_calls(("c", "echo", "{}")), _text("fin")], [_text("2")]]),
        store,
        [_Echo(store)],
    )
    session = store.create(CreateOptions())
    await agent.run_turn(session, "one", listener=seen.append)
    await agent.run_turn(session, "two", listener=seen.append)
    assert seen == list(session.events)
    assert [e.seq for e in seen] == list(range(len(seen)))


async def test_turn_number_continues_after_the_seed() -> None:
    store = InMemorySessionStore()
    seed = [turn_start(0, 0, 4), turn_end(1, 0, 4, "completed")]
    session = store.create(CreateOptions(seed=seed))
    assert next_turn_number(session.events) == 5
    model = ScriptedModel([[_text("x")]])
    outcome = await Agent(model, store, []).run_turn(session, "go")
    assert outcome.turn == 5
    assert session.events[2].data["turn"] == 5
    assert model.requests[0].turn == 5


async def test_cancel_during_a_tool_closes_the_turn_and_returns_aborted() -> None:
    forever = _Forever()
    script = [_calls(("c1", "forever", "{}"), ("c2", "forever", "{}"))]
    agent, store, session, _ = _setup(script, [forever])
    task = asyncio.create_task(agent.run_turn(session, "go"))
    await forever.started.wait()
    task.cancel()
    outcome = await task
    assert outcome.kind == "aborted"
    assert outcome.final_text == ""
    results = _of(session, "tool/result")
    assert [(r["callId"], r["content"][0]["text"], r["isError"]) for r in results] == [
        ("c1", "cancelled", True),
        ("c2", "cancelled before dispatch", True),
    ]
    assert _types(session)[-6:] == [
        "tool/call",
        "tool/result",
        "tool/call",
        "tool/result",
        "step/end",
        "turn/end",
    ]
    assert session.events[-1].data == {
        "turn": 1,
        "reason": {"kind": "aborted", "reason": "session/cancel"},
    }
    assert store.load(session.id).events == list(session.events)
    # The caller's task is not left cancelled: it can go on awaiting.
    await asyncio.sleep(0)


async def test_cancel_while_streaming_keeps_chunks_and_writes_no_message() -> None:
    agent, store, session, _ = _setup([HangEntry(chunks=tuple(_text("abc")[:2]))])
    seen: list[Event] = []
    streaming = asyncio.Event()

    def listener(event: Event) -> None:
        seen.append(event)
        if len(seen) == 6:  # the header and both chunks
            streaming.set()

    task = asyncio.create_task(agent.run_turn(session, "go", listener=listener))
    await streaming.wait()
    task.cancel()
    outcome = await task
    assert outcome.kind == "aborted"
    assert _types(session) == [
        "turn/start",
        "user/message",
        "step/start",
        "request/header",
        "step/end",
        "turn/end",
    ]
    assert len(store.load(session.id).events) == 8
    assert seen == list(session.events)


async def test_cancel_in_the_callers_own_task_is_consumed() -> None:
    agent, _, session, _ = _setup([HangEntry()])

    streaming = asyncio.Event()

    def listener(event: Event) -> None:
        if event.type == "assistant/chunk":
            streaming.set()

    async def caller() -> str:
        outcome = await agent.run_turn(session, "go", listener=listener)
        await asyncio.sleep(0)  # would raise if the task were still cancelled
        return outcome.kind

    task = asyncio.create_task(caller())
    await streaming.wait()
    task.cancel()
    assert await task == "aborted"


def test_config_and_tool_names_are_checked() -> None:
    store = InMemorySessionStore()
    with pytest.raises(ValueError, match="max_steps"):
        Agent(ScriptedModel(), store, [], AgentConfig(max_steps=0))
    with pytest.raises(ValueError, match="two tools are named 'echo'"):
        Agent(ScriptedModel(), store, [_Echo(store), _Echo(store)])
    agent = Agent(ScriptedModel(), store, [_Boom(), _Echo(store)])
    assert list(agent.tools) == ["boom", "echo"]
    assert agent.config == AgentConfig()


async def test_requests_carry_the_system_prompt_and_tool_specs(tmp_path: Path) -> None:
    store = InMemorySessionStore()
    model = ScriptedModel([[_text("x")]])
    agent = Agent(model, store, [_Boom()], AgentConfig(system_prompt="be brief"))
    await agent.run_turn(store.create(CreateOptions()), "go")
    [request] = model.requests
    assert request.system == "be brief"
    assert request.tools == [_Boom().spec]
    assert request.messages == [{"role": "user", "content": [{"type": "text", "text": "go"}]}]


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ({"kind": "error"}, {"message": "the model stream failed"}),
        ({"kind": "aborted"}, {"message": "model stream aborted", "code": "ABORTED"}),
        (
            {"kind": "error", "failure": {"message": "nope", "code": "AUTH"}},
            {"message": "nope", "code": "AUTH"},
        ),
    ],
)
async def test_a_finish_with_an_error_reason_ends_the_turn_as_an_error(
    reason: dict[str, Any], expected: dict[str, str]
) -> None:
    chunks = _text("x")
    chunks[-1] = {"type": "finish", "reason": reason}  # type: ignore[typeddict-item]
    agent, _, session, _ = _setup([chunks])
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "error"
    # The failed step's content is not a message (its chunks stay logged).
    assert "assistant/message" not in _types(session)
    assert session.events[-1].data["reason"] == {"kind": "error", "step": 1, **expected}


async def test_nothing_after_finish_is_read_or_logged() -> None:
    extra: Chunk = {"type": "text-delta", "index": 0, "text": "late"}
    agent, _, session, _ = _setup([[*_text("x"), extra]])
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "completed"
    chunks = [e.data["chunk"] for e in session.events if e.type == "assistant/chunk"]
    assert chunks == _text("x")

"""Upstream's June ``agent-loop`` specs as conformance cases, run with ``profile="june"``.

Upstream drives a ``ReactLoopAgent`` through an inbox and plugin hooks; ours is one
``Agent.run_turn`` per user turn, so each case runs the same script through our agent and
asserts what upstream asserts on the log, the requests and the turn's end. The cases of
``loop.spec.ts``, ``review-fixes.spec.ts``, ``coverage-edges.spec.ts``, ``cancel.spec.ts``,
``resume.spec.ts`` and ``properties.spec.ts`` are marked by file; ledger (and the cases that
do not apply): COMPATIBILITY.md § "Upstream unit tests".
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    Chunk,
    CreateOptions,
    Event,
    HangEntry,
    SessionMeta,
    ThrowEntry,
    ToolContext,
    ToolOutcome,
    ToolSpec,
    messages_from_events,
)
from dsh_core.testing import InMemorySessionStore, ScriptedModel

pytestmark = pytest.mark.anyio

JUNE = AgentConfig(profile="june", system_prompt="You are a test agent.")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- upstream's mock-adapter.ts responses --------------------------------------------------------


def _text(text: str, finish: str = "stop") -> list[Chunk]:
    """``textResponse``/``maxTokensResponse``: one delta per character, usage, finish."""
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        *({"type": "text-delta", "index": 0, "text": char} for char in text),  # type: ignore[misc]
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": len(text)}},  # type: ignore[typeddict-item]
        {"type": "finish", "reason": {"kind": finish}},  # type: ignore[typeddict-item]
    ]


def _call(call_id: str, name: str, arguments: str, usage: bool = True) -> list[Chunk]:
    """``toolCallResponse`` with the arguments text as given (split like upstream's)."""
    chunks: list[Chunk] = [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": call_id,
            "name": name,
            "argumentsDelta": arguments[:5],
        },
        {"type": "tool-call-delta", "index": 0, "id": call_id, "argumentsDelta": arguments[5:]},  # type: ignore[typeddict-item]
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments},
        },
    ]
    if usage:
        chunks.append({"type": "usage", "usage": {"inputTokens": 10, "outputTokens": 5}})  # type: ignore[typeddict-item]
    chunks.append({"type": "finish", "reason": {"kind": "tool-calls"}})
    return chunks


def _finish(kind: str, chunks: list[Chunk]) -> list[Chunk]:
    return [*chunks[:-1], {"type": "finish", "reason": {"kind": kind}}]  # type: ignore[typeddict-item]


class _Echo:
    """Answers ``echo: <text>`` (or the JSON it got); counts its runs; may wait on a gate."""

    def __init__(self, name: str = "echo", gate: asyncio.Event | None = None) -> None:
        self.name = name
        self.runs: list[Mapping[str, Any]] = []
        self.started = asyncio.Event()
        self.gate = gate

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description="echo back",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        self.runs.append(arguments)
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        return ToolOutcome(f"echo: {arguments.get('text')}")


class _Coded(Exception):
    """A Python stand-in for upstream's ``HarnessError``: an exception with a ``code``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class _Raises:
    spec = ToolSpec(name="boom", description="always fails", parameters={"type": "object"})

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        raise _Coded("exploded", "BOOM")


def _setup(
    script: Sequence[Any], tools: Sequence[Any] = (), seed: Sequence[Event] = ()
) -> tuple[Agent, InMemorySessionStore, Any, ScriptedModel]:
    store = InMemorySessionStore()
    model = ScriptedModel([list(script)])
    agent = Agent(model, store, list(tools), JUNE)
    session = store.create(CreateOptions(seed=seed, meta=SessionMeta(cwd="/")))
    return agent, store, session, model


def _types(events: Sequence[Event]) -> list[str]:
    return [event.type for event in events if event.type != "assistant/chunk"]


def _reasons(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [event.data["reason"] for event in events if event.type == "turn/end"]


def _of(events: Sequence[Event], kind: str) -> list[dict[str, Any]]:
    return [event.data for event in events if event.type == kind]


_NONE: list[dict[str, Any]] = []
_EMPTY: dict[str, Any] = {}
_USAGE = {"inputTokens": 10, "outputTokens": 5}
_GO = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]


# --- loop.spec.ts ---


async def test_loop_runs_a_simple_turn_with_ordered_events() -> None:
    agent, _, session, _ = _setup([_text("hello there")])
    outcome = await agent.run_turn(session, "hi")
    assert (outcome.kind, outcome.final_text) == ("completed", "hello there")
    assert _types(session.events) == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    [message] = _of(session.events, "assistant/message")
    assert message["usage"] == {"inputTokens": 10, "outputTokens": len("hello there")}
    derived = messages_from_events(session.events)
    assert [m["role"] for m in derived] == ["user", "assistant"]
    assert derived[1]["content"] == [{"type": "text", "text": "hello there"}]


async def test_loop_round_trips_tool_calls_into_the_next_request() -> None:
    echo = _Echo()
    agent, _, session, model = _setup(
        [_call("c1", "echo", '{"text":"ping"}'), _text("done")], [echo]
    )
    await agent.run_turn(session, "use the tool")
    assert len(model.requests) == 2
    results = [m for m in model.requests[1].messages if m["role"] == "tool"]
    assert results == [
        {
            "role": "tool",
            "callId": "c1",
            "content": [{"type": "text", "text": "echo: ping"}],
            "isError": False,
        }
    ]
    assert {"tool/call", "tool/result"} <= set(_types(session.events))


async def test_loop_passes_the_system_prompt_and_tool_schemas_into_the_request() -> None:
    agent, _, session, model = _setup([_text("ok")], [_Echo("noop")])
    await agent.run_turn(session, "hi")
    [request] = model.requests
    assert request.system == "You are a test agent."
    assert [tool["name"] for tool in request.tools] == ["noop"]


async def test_loop_records_raw_chunks_for_replay() -> None:
    streamed: list[Event] = []
    agent, _, session, _ = _setup([_text("abc")])
    await agent.run_turn(session, "hi", listener=streamed.append)
    chunks = [e.data["chunk"] for e in session.events if e.type == "assistant/chunk"]
    assert len(chunks) == 7  # block-start + 3 deltas + block-end + usage + finish
    assert len([e for e in streamed if e.type == "assistant/chunk"]) == 7
    assert "".join(c["text"] for c in chunks if c["type"] == "text-delta") == "abc"


@pytest.mark.parametrize(
    ("script", "reasons", "requests"),
    [
        # surfaces max-tokens as the turn-end reason when the last step is cut off
        ([[_text("truncat", "max-tokens")]], [{"kind": "max-tokens"}], 1),
        # a completed step after no max-tokens keeps the turn completed (no leak across turns)
        (
            [[_text("cut", "max-tokens")], [_text("clean")]],
            [{"kind": "max-tokens"}, {"kind": "completed"}],
            2,
        ),
    ],
)
async def test_loop_max_tokens_turn_end_reasons(
    script: list[list[Any]], reasons: list[dict[str, Any]], requests: int
) -> None:
    agent, _, session, model = _setup([entry for turn in script for entry in turn])
    for _ in script:
        await agent.run_turn(session, "go")
    assert _reasons(session.events) == reasons
    assert len(model.requests) == requests


@pytest.mark.parametrize(
    ("usage", "message"),
    [
        # does not dispatch tool calls from a max-tokens-truncated step (usage still logged)
        (True, [{"turn": 1, "step": 1, "content": _NONE, "usage": _USAGE}]),
        # appends no assistant/message for a max-tokens step with empty content and no usage
        (False, _NONE),
    ],
)
async def test_loop_a_max_tokens_step_never_dispatches_its_calls(
    usage: bool, message: list[dict[str, Any]]
) -> None:
    echo = _Echo()
    script = [_finish("max-tokens", _call("c1", "echo", '{"text":"x"}', usage=usage))]
    agent, _, session, model = _setup(script, [echo])
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "max-tokens"
    assert echo.runs == []
    assert "tool/call" not in _types(session.events)
    assert messages_from_events(session.events) == _GO
    assert _of(session.events, "assistant/message") == message
    assert len(model.requests) == 1


async def test_loop_no_assistant_message_for_an_empty_stop_without_usage() -> None:
    agent, _, session, _ = _setup([[{"type": "finish", "reason": {"kind": "stop"}}]])
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "completed"
    assert "assistant/message" not in _types(session.events)
    assert messages_from_events(session.events) == _GO


async def test_loop_keeps_safe_max_tokens_text_while_dropping_a_truncated_call() -> None:
    chunks: list[Chunk] = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "partial text"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "partial text"}},
        {"type": "block-start", "index": 1, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 1,
            "id": "c1",
            "name": "echo",
            "argumentsDelta": '{"text"',
        },
        {"type": "finish", "reason": {"kind": "max-tokens"}},
    ]
    agent, _, session, _ = _setup([chunks], [_Echo()])
    await agent.run_turn(session, "go")
    assert "tool/call" not in _types(session.events)
    assert messages_from_events(session.events) == [
        *_GO,
        {"role": "assistant", "content": [{"type": "text", "text": "partial text"}]},
    ]


async def test_loop_the_turn_end_is_durable_when_the_turn_returns() -> None:
    # "awaits session/flush at turn end": the store has the whole turn when run_turn returns.
    agent, store, session, _ = _setup([_text("ok")])
    await agent.run_turn(session, "hi")
    assert _types(store.load(session.id).events)[-1] == "turn/end"


async def test_loop_errors_from_the_model_end_the_turn_with_the_failing_step() -> None:
    agent, _, session, _ = _setup([])  # script exhausted: the client raises
    outcome = await agent.run_turn(session, "hi")
    assert outcome.kind == "error"
    assert outcome.error is not None
    assert "has 0 entries" in outcome.error.message
    [reason] = _reasons(session.events)
    assert (reason["kind"], reason["step"]) == ("error", 1)


async def test_loop_replays_a_session_log_into_an_identical_derived_history() -> None:
    agent, store, session, _ = _setup(
        [_call("c1", "echo", '{"text":"x"}'), _text("done")], [_Echo()]
    )
    await agent.run_turn(session, "run")
    replayed = store.create(CreateOptions(session_id="replayed", seed=session.events))
    assert messages_from_events(replayed.events) == messages_from_events(session.events)
    assert [e.type for e in replayed.events] == [e.type for e in session.events]


# --- cancel.spec.ts / loop.spec.ts: cancel mid-stream --------------------------------------------


async def test_cancel_mid_step_aborts_the_model_call_and_the_next_prompt_runs() -> None:
    agent, _, session, _ = _setup([HangEntry(), _text("after")])
    streaming = asyncio.Event()
    task = asyncio.create_task(agent.run_turn(session, "go", listener=lambda _: streaming.set()))
    await streaming.wait()
    task.cancel()
    outcome = await task
    assert outcome.kind == "aborted"
    assert _reasons(session.events)[0]["kind"] == "aborted"
    # a prompt sent after a cancelled turn settles runs normally
    second = await agent.run_turn(session, "again")
    assert (second.turn, second.kind, second.final_text) == (2, "completed", "after")


# --- review-fixes.spec.ts ---


async def test_review_abort_inside_a_tool_stops_the_remaining_tools_and_the_next_step() -> None:
    first, second = _Echo("first", gate=asyncio.Event()), _Echo("second")
    script = [
        [
            *_call("c1", "first", "{}")[:4],
            *(
                {**chunk, "index": 1} if "index" in chunk else chunk
                for chunk in _call("c2", "second", "{}")[:4]
            ),
            {"type": "finish", "reason": {"kind": "tool-calls"}},
        ],
        _text("never"),
    ]
    agent, _, session, model = _setup(script, [first, second])
    task = asyncio.create_task(agent.run_turn(session, "go"))
    await first.started.wait()
    task.cancel()
    outcome = await task
    assert outcome.kind == "aborted"
    assert second.runs == []
    assert len(model.requests) == 1
    results = _of(session.events, "tool/result")
    assert [(r["callId"], r["isError"]) for r in results] == [("c1", True), ("c2", True)]


async def test_review_a_forked_session_continues_turn_numbers_after_the_seed() -> None:
    parent, _, parent_session, _ = _setup([_text("one")])
    await parent.run_turn(parent_session, "first")
    agent, _, child, _ = _setup([_text("two")], seed=parent_session.events)
    outcome = await agent.run_turn(child, "second")
    assert outcome.turn == 2
    assert [e.data["turn"] for e in child.events if e.type == "turn/start"] == [1, 2]


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (
            {"kind": "error", "message": "provider 401", "code": "AUTH"},
            {"kind": "error", "step": 1, "message": "provider 401", "code": "AUTH"},
        ),
        (
            {"kind": "aborted"},
            {"kind": "error", "step": 1, "message": "model stream aborted", "code": "ABORTED"},
        ),
        (
            {"kind": "error", "message": "codeless failure"},
            {"kind": "error", "step": 1, "message": "codeless failure"},
        ),
    ],
)
async def test_review_a_failing_finish_ends_the_turn_as_an_error(
    reason: dict[str, Any], expected: dict[str, Any]
) -> None:
    agent, _, session, _ = _setup([[{"type": "finish", "reason": reason}]])
    outcome = await agent.run_turn(session, "go")
    assert outcome.kind == "error"
    assert _reasons(session.events) == [expected]
    assert "assistant/message" not in _types(session.events)


async def test_review_the_listener_sees_step_start_already_in_the_session() -> None:
    seen: list[bool] = []
    agent, _, session, _ = _setup([_text("done")])

    def listener(event: Event) -> None:
        if event.type == "step/start":
            seen.append(event in session.events)

    await agent.run_turn(session, "go", listener=listener)
    assert seen == [True]


# --- coverage-edges.spec.ts ---


@pytest.mark.parametrize(
    ("arguments", "runs"),
    [
        # passes through non-JSON arguments without crashing (the call is logged raw)
        ("not json", _NONE),
        # uses an empty object when the arguments are an empty string
        ("", [_EMPTY]),
    ],
)
async def test_edges_tool_argument_parsing(arguments: str, runs: list[dict[str, Any]]) -> None:
    echo = _Echo()
    chunks: list[Chunk] = [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "tool-call", "id": "c1", "name": "echo", "arguments": arguments},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    agent, _, session, _ = _setup([chunks, _text("done")], [echo])
    outcome = await agent.run_turn(session, "use tool")
    assert outcome.kind == "completed"
    [call] = _of(session.events, "tool/call")
    assert call["arguments"] == arguments
    assert len(_of(session.events, "tool/result")) == 1
    assert echo.runs == runs


async def test_edges_a_coded_model_error_keeps_its_code_on_turn_end() -> None:
    agent, _, session, _ = _setup([ThrowEntry((), "server overloaded", "RATE_LIMIT")])
    outcome = await agent.run_turn(session, "go")
    assert outcome.error is not None
    assert outcome.error.message == "server overloaded"
    assert _reasons(session.events) == [
        {"kind": "error", "step": 1, "message": "server overloaded", "code": "RATE_LIMIT"}
    ]


async def test_edges_a_coded_tool_error_lands_on_the_tool_result() -> None:
    agent, _, session, _ = _setup([_call("c1", "boom", "{}"), _text("done")], [_Raises()])
    await agent.run_turn(session, "go")
    [result] = _of(session.events, "tool/result")
    assert result["isError"] is True
    assert result["error"] == {"name": "_Coded", "code": "BOOM"}
    assert result["content"] == [{"type": "text", "text": "Error: exploded"}]


# --- resume.spec.ts ---


async def test_resume_a_session_without_cwd_runs_a_turn() -> None:
    store = InMemorySessionStore()
    agent = Agent(ScriptedModel([[_text("ok")]]), store, [], JUNE)
    session = store.create(CreateOptions())
    assert session.header.cwd is None
    assert (await agent.run_turn(session, "hi")).kind == "completed"


async def test_resume_reloads_history_and_turn_numbering_without_duplicate_seqs() -> None:
    store = InMemorySessionStore()
    model = ScriptedModel(by_id={"s": [_text("first"), _text("second")]})
    agent = Agent(model, store, [], JUNE)
    session = store.create(CreateOptions(session_id="s"))
    await agent.run_turn(session, "one")
    session.close()
    resumed = store.resume("s")
    outcome = await agent.run_turn(resumed, "two")
    assert outcome.turn == 2
    seqs = [event.seq for event in store.load("s").events]
    assert seqs == list(range(len(seqs)))
    assert [m["role"] for m in model.requests[1].messages] == ["user", "assistant", "user"]


# --- properties.spec.ts ---


async def test_properties_sequential_turns_get_increasing_numbers() -> None:
    agent, _, session, _ = _setup([_text(str(n)) for n in range(5)])
    outcomes = [await agent.run_turn(session, f"m{n}") for n in range(5)]
    assert [o.turn for o in outcomes] == [1, 2, 3, 4, 5]
    assert [o.final_text for o in outcomes] == ["0", "1", "2", "3", "4"]
    prompts = [m["content"][0]["text"] for m in _of(session.events, "user/message")]
    assert prompts == ["m0", "m1", "m2", "m3", "m4"]

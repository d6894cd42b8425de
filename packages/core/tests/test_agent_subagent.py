"""``SubagentTool`` under the June loop profile: depth, child creation, outcomes, cancel."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    Chunk,
    CreateOptions,
    Event,
    HangEntry,
    Session,
    SessionMeta,
    SubagentBackend,
    SubagentRequest,
    SubagentTool,
    ThrowEntry,
    Tool,
)
from dsh_core.testing import InMemorySessionStore, ScriptedModel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Backend:
    """A spawn-like backend that also records what the store held when it was asked."""

    def __init__(self, store: InMemorySessionStore) -> None:
        self.store = store
        self.requests: list[tuple[SubagentRequest, int]] = []
        self.parent_stored: list[list[str]] = []

    @property
    def tool_name(self) -> str:
        return "delegate"

    @property
    def tool_description(self) -> str:
        return "delegate a subtask"

    def child_options(self, parent: Session, request: SubagentRequest, depth: int) -> CreateOptions:
        self.requests.append((request, depth))
        stored = self.store.load(parent.id).events
        self.parent_stored.append([e.data["callId"] for e in stored if e.type == "tool/call"])
        return CreateOptions(
            meta=SessionMeta(
                cwd=parent.header.cwd,
                parent_session=parent.id,
                origin="subagent",
                delegation_depth=depth,
            )
        )


def _text(text: str) -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def _delegate(call_id: str, arguments: dict[str, Any] | str) -> list[Chunk]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "tool-call", "id": call_id, "name": "delegate", "arguments": raw},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


_ASK = {"description": "child", "prompt": "say CHILD"}


def _setup(
    scripts: list[list[Any]], *, depth: int | None = None, config: AgentConfig | None = None
) -> tuple[Agent, InMemorySessionStore, Session, _Backend, ScriptedModel]:
    store = InMemorySessionStore()
    backend = _Backend(store)
    tools: list[Tool] = [SubagentTool(backend)]
    model = ScriptedModel(scripts)
    agent = Agent(model, store, tools, config or AgentConfig(profile="june"))
    parent = store.create(CreateOptions(meta=SessionMeta(cwd="/w", delegation_depth=depth)))
    return agent, store, parent, backend, model


def _result(session: Session) -> dict[str, Any]:
    [result] = [e.data for e in session.events if e.type == "tool/result"]
    return result


async def test_child_runs_one_turn_and_its_final_text_is_the_result() -> None:
    agent, store, parent, backend, model = _setup(
        [[_delegate("c1", _ASK), _text("PARENT_DONE")], [_text("CHILD")]]
    )
    seen: list[Event] = []
    outcome = await agent.run_turn(parent, "go", listener=seen.append)
    assert outcome.final_text == "PARENT_DONE"
    result = _result(parent)
    assert (result["content"], result["isError"]) == ([{"type": "text", "text": "CHILD"}], False)
    assert backend.requests == [(SubagentRequest("child", "say CHILD"), 1)]
    # The parent was durable through the tool call before the child was created.
    assert backend.parent_stored == [["c1"]]
    [child_header] = [h for h in store.list_sessions() if h.id != parent.id]
    assert (child_header.parent_session, child_header.delegation_depth) == (parent.id, 1)
    child = store.load(child_header.id)
    assert child.events[1].data["content"] == [{"type": "text", "text": "say CHILD"}]
    assert child.events[-1].data == {"turn": 1, "reason": {"kind": "completed"}}
    # Child events never reach the parent's listener.
    assert seen == list(parent.events)
    assert [r.session_id for r in model.requests] == [parent.id, child_header.id, parent.id]
    model.assert_consumed()
    # The child was closed: it can be reopened for writing.
    store.resume(child_header.id).close()


async def test_depth_over_the_limit_is_an_error_result_and_no_child() -> None:
    agent, store, parent, backend, _ = _setup([[_delegate("c1", _ASK), _text("ok")]], depth=1)
    outcome = await agent.run_turn(parent, "go")
    assert outcome.kind == "completed"
    result = _result(parent)
    assert result["isError"] is True
    assert result["content"][0]["text"] == "delegation depth 2 exceeds the maximum 1"
    assert backend.requests == []
    assert [h.id for h in store.list_sessions()] == [parent.id]


async def test_a_higher_limit_allows_deeper_children() -> None:
    agent, store, parent, backend, _ = _setup(
        [[_delegate("c1", _ASK), _text("ok")], [_text("CHILD")]],
        depth=1,
        config=AgentConfig(max_delegation_depth=2),
    )
    await agent.run_turn(parent, "go")
    assert backend.requests[0][1] == 2
    assert _result(parent)["isError"] is False
    assert len(store.list_sessions()) == 2


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"prompt": "p"}, 'Error: invalid arguments: missing required property "description"'),
        ({"description": "d", "prompt": 7}, 'Error: invalid arguments: "prompt" must be a string'),
    ],
)
async def test_invalid_arguments_are_error_results(
    arguments: dict[str, Any], expected: str
) -> None:
    agent, store, parent, _, _ = _setup([[_delegate("c1", arguments), _text("ok")]])
    await agent.run_turn(parent, "go")
    result = _result(parent)
    assert result["isError"] is True
    assert result["content"][0]["text"] == expected
    assert result["error"] == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
    assert len(store.list_sessions()) == 1


async def test_a_failing_child_is_an_error_result() -> None:
    agent, _, parent, _, _ = _setup(
        [[_delegate("c1", _ASK), _text("ok")], [ThrowEntry((), "provider down", "HTTP_503")]]
    )
    outcome = await agent.run_turn(parent, "go")
    assert outcome.kind == "completed"
    result = _result(parent)
    assert result["isError"] is True
    # upstream's text; the cause is in the child's own log (its turn/end)
    assert result["content"][0]["text"] == "Error: subagent run failed"


async def test_cancelling_the_parent_aborts_the_child_and_the_parent() -> None:
    agent, store, parent, _, model = _setup([[_delegate("c1", _ASK)], [HangEntry()]])
    task = asyncio.create_task(agent.run_turn(parent, "go"))
    # The child's chunks are not flushed yet; its model call having started is the signal.
    for _ in range(10_000):
        if len(model.requests) == 2:
            break
        await asyncio.sleep(0)
    assert len(model.requests) == 2
    task.cancel()
    outcome = await task
    assert outcome.kind == "aborted"
    assert not task.cancelled()
    result = _result(parent)
    assert (result["content"][0]["text"], result["isError"]) == ("cancelled", True)
    assert parent.events[-1].data["reason"] == {"kind": "aborted", "reason": "session/cancel"}
    child = store.load(store.list_sessions()[1].id)
    assert child.events[-1].data["reason"] == {"kind": "aborted", "reason": "session/cancel"}
    assert [e.type for e in child.events][-2:] == ["step/end", "turn/end"]


def test_spec_comes_from_the_backend() -> None:
    store = InMemorySessionStore()
    backend: SubagentBackend = _Backend(store)
    spec = SubagentTool(backend).spec
    assert (spec["name"], spec["description"]) == ("delegate", "delegate a subtask")
    assert spec["parameters"]["required"] == ["description", "prompt"]

"""Upstream's ``subagent-fork/tests/subagent-fork.spec.ts`` (June
2026) as conformance cases (the multi-subagent case, which needs both backends, is in the
workspace tests): fork seeding, ``seedLength`` and the child's own output. Ledger:
COMPATIBILITY.md § "Upstream unit tests"."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    Chunk,
    CreateOptions,
    Event,
    Session,
    SubagentTool,
    completed_turn_prefix,
)
from dsh_core.testing import InMemorySessionStore, ScriptedModel
from dsh_subagent_fork import ForkBackend

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _text(text: str) -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


_EMPTY_STOP: list[Chunk] = [{"type": "finish", "reason": {"kind": "stop"}}]


def _delegate(tool: str, prompt: str, call_id: str = "c1") -> list[Chunk]:
    arguments = json.dumps({"description": "d", "prompt": prompt})
    block: Any = {"type": "tool-call", "id": call_id, "name": tool, "arguments": arguments}
    return [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {"type": "block-end", "index": 0, "block": block},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


def _setup(parent: list[Any], *children: list[Any]) -> tuple[Agent, InMemorySessionStore, Session]:
    store = InMemorySessionStore()
    tools = [SubagentTool(ForkBackend())]
    agent = Agent(ScriptedModel([parent, *children]), store, tools, AgentConfig(profile="june"))
    return agent, store, store.create(CreateOptions())


def _child(store: InMemorySessionStore, parent: Session, index: int = 0) -> Any:
    headers = [h for h in store.list_sessions() if h.id != parent.id]
    return store.load(headers[index].id)


def _result(parent: Session) -> dict[str, Any]:
    return [e.data for e in parent.events if e.type == "tool/result"][-1]


# describe('completedTurnPrefix')
def test_the_prefix_of_a_parent_that_never_completed_a_turn_is_empty() -> None:
    assert completed_turn_prefix([Event("turn/start", 0, 0, {"turn": 1})]) == []


def test_the_prefix_runs_through_the_last_turn_end() -> None:
    events = [
        Event("turn/start", 0, 0, {"turn": 1}),
        Event("turn/end", 1, 0, {"turn": 1, "reason": {"kind": "completed"}}),
        Event("turn/start", 2, 0, {"turn": 2}),
        Event("step/start", 3, 0, {"turn": 2, "step": 1}),
    ]
    assert completed_turn_prefix(events) == events[:2]


# describe('dsh-subagent-fork')
async def test_a_fork_with_no_completed_parent_turn_is_unseeded() -> None:
    agent, store, parent = _setup(
        [_delegate("subagent_fork", "child q"), _text("ok")], [_text("c")]
    )
    await agent.run_turn(parent, "first")
    child = _child(store, parent)
    assert child.header.seed_length is None
    assert child.events[0].type == "turn/start"
    assert _result(parent)["content"] == [{"type": "text", "text": "c"}]


async def test_the_child_is_seeded_with_the_parents_completed_turns() -> None:
    agent, store, parent = _setup(
        [_text("parent answer"), _delegate("subagent_fork", "child question"), _text("ok")],
        [_text("child answer")],
    )
    await agent.run_turn(parent, "parent question")
    prefix = len(parent.events)
    await agent.run_turn(parent, "now fork")
    child = _child(store, parent)
    assert child.header.seed_length == prefix
    assert child.header.parent_session == parent.id
    assert [e.to_json() for e in child.events[:prefix]] == [
        e.to_json() for e in parent.events[:prefix]
    ]
    seeded = [e for e in child.events[:prefix] if e.type == "user/message"]
    assert seeded[0].data["content"] == [{"type": "text", "text": "parent question"}]
    # The open parent turn (the one delegating) is not in the seed: two turn/ends in the child,
    # the seeded one and its own.
    assert [e.type for e in child.events].count("turn/end") == 2
    assert _result(parent)["content"] == [{"type": "text", "text": "child answer"}]


async def test_the_seeded_parent_output_is_not_the_childs_result() -> None:
    agent, _, parent = _setup(
        [_text("parent stale"), _delegate("subagent_fork", "child question"), _text("ok")],
        [_EMPTY_STOP],
    )
    await agent.run_turn(parent, "parent question")
    await agent.run_turn(parent, "now fork")
    result = _result(parent)
    assert "parent stale" not in json.dumps(result)
    assert result["isError"] is False

"""Upstream's ``subagent-spawn/tests/subagent-spawn.spec.ts`` and ``tool-subagent.spec.ts``
(June 2026) as conformance cases, under the June loop profile: a spawned child through core's
agent and ``SubagentTool``. Ledger: COMPATIBILITY.md § "Upstream unit tests"."""

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
    SessionMeta,
    SubagentTool,
    ThrowEntry,
)
from dsh_core.testing import InMemorySessionStore, ScriptedModel
from dsh_subagent_spawn import SpawnBackend

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _text(text: str, finish: str = "stop") -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": finish}},  # type: ignore[typeddict-item]
    ]


def _delegate(prompt: str) -> list[Chunk]:
    arguments = json.dumps({"description": "d", "prompt": prompt})
    block = {"type": "tool-call", "id": "c1", "name": "subagent", "arguments": arguments}
    return [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {"type": "block-end", "index": 0, "block": block},  # type: ignore[typeddict-item]
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


async def _run(
    child_script: list[Any], *, max_depth: int = 1, parent_depth: int | None = None
) -> tuple[Session, InMemorySessionStore, dict[str, Any], ScriptedModel]:
    store = InMemorySessionStore()
    model = ScriptedModel([[_delegate("child question"), _text("parent done")], child_script])
    agent = Agent(
        model,
        store,
        [SubagentTool(SpawnBackend())],
        AgentConfig(max_delegation_depth=max_depth, profile="june"),
    )
    meta = SessionMeta(cwd="/work/here", delegation_depth=parent_depth)
    parent = store.create(CreateOptions(meta=meta))
    await agent.run_turn(parent, "parent question")
    [result] = [e.data for e in parent.events if e.type == "tool/result"]
    return parent, store, result, model


def _children(store: InMemorySessionStore, parent: Session) -> list[Any]:
    return [store.load(h.id) for h in store.list_sessions() if h.id != parent.id]


async def test_a_fresh_child_runs_to_completion_and_returns_its_final_output() -> None:
    _, _, result, _ = await _run([_text("child answer")])
    assert (result["content"], result["isError"]) == (
        [{"type": "text", "text": "child answer"}],
        False,
    )


async def test_the_child_has_its_own_session_with_lineage_cwd_and_depth() -> None:
    parent, store, _, _ = await _run([_text("x")])
    [child] = _children(store, parent)
    header = child.header
    assert header.id != parent.id
    assert (header.parent_session, header.cwd, header.origin, header.delegation_depth) == (
        parent.id,
        "/work/here",
        "subagent",
        1,
    )
    assert header.seed_length is None


async def test_a_fresh_child_does_not_inherit_the_parent_conversation() -> None:
    parent, store, _, model = await _run([_text("x")])
    [child] = _children(store, parent)
    events: list[Event] = list(child.events)
    assert events[0].type == "turn/start"
    users = [e for e in events if e.type == "user/message"]
    assert [u.data["content"] for u in users] == [[{"type": "text", "text": "child question"}]]
    child_request = model.requests[1]
    assert [m["role"] for m in child_request.messages] == ["user"]


@pytest.mark.parametrize(
    ("case", "child_script", "text"),
    [
        (
            "a child that hit its token ceiling",
            [_text("cut", finish="max-tokens")],
            "Error: subagent run hit its token limit before finishing",
        ),
        (
            "a child whose turn errored",
            [ThrowEntry((), "script exhausted", "X")],
            "Error: subagent run failed",
        ),
    ],
)
async def test_a_child_that_did_not_complete_is_an_error_result(
    case: str, child_script: list[Any], text: str
) -> None:
    _, _, result, _ = await _run(child_script)
    assert (result["content"], result["isError"]) == ([{"type": "text", "text": text}], True), case


async def test_no_child_is_spawned_past_the_maximum_depth() -> None:
    parent, store, result, _ = await _run([], parent_depth=1)
    assert result["isError"] is True
    assert "delegation depth 2 exceeds the maximum 1" in result["content"][0]["text"]
    assert _children(store, parent) == []


async def test_the_tool_shows_only_description_and_prompt_to_the_model() -> None:
    spec = SubagentTool(SpawnBackend()).spec
    assert spec["name"] == "subagent"
    assert set(spec["parameters"]["properties"]) == {"description", "prompt"}
    assert spec["parameters"]["required"] == ["description", "prompt"]

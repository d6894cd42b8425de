"""Upstream's ``subagent-fork/tests/multi-subagent.spec.ts`` (June 2026): a spawn child and a
fork child on one parent. Ledger: COMPATIBILITY.md § "Upstream unit tests"."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_core import Agent, AgentConfig, Chunk, CreateOptions, SubagentTool
from dsh_core.testing import InMemorySessionStore, ScriptedModel
from dsh_subagent_fork import ForkBackend
from dsh_subagent_spawn import SpawnBackend

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


def _delegate(tool: str, prompt: str, call_id: str) -> list[Chunk]:
    arguments = json.dumps({"description": "d", "prompt": prompt})
    block: Any = {"type": "tool-call", "id": call_id, "name": tool, "arguments": arguments}
    return [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {"type": "block-end", "index": 0, "block": block},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


def test_both_backends_coexist_under_their_own_tool_names() -> None:
    names = {SubagentTool(SpawnBackend()).spec["name"], SubagentTool(ForkBackend()).spec["name"]}
    assert names == {"subagent", "subagent_fork"}


# multi-subagent.spec.ts: 'the same parent drives a spawn child AND a fork child'
async def test_one_parent_drives_a_spawn_child_and_a_fork_child_then_keeps_working() -> None:
    store = InMemorySessionStore()
    tools = [SubagentTool(ForkBackend()), SubagentTool(SpawnBackend())]
    script = [
        _delegate("subagent", "spawned", "c1"),
        _delegate("subagent_fork", "forked", "c2"),
        _text("both done"),
    ]
    agent = Agent(
        ScriptedModel([script, [_text("from spawn")], [_text("from fork")]]),
        store,
        tools,
        AgentConfig(profile="june"),
    )
    parent = store.create(CreateOptions())
    outcome = await agent.run_turn(parent, "go")
    assert (outcome.kind, outcome.final_text) == ("completed", "both done")
    results = [e.data["content"][0]["text"] for e in parent.events if e.type == "tool/result"]
    assert results == ["from spawn", "from fork"]
    assert len(store.list_sessions()) == 3

"""Upstream's ``tool-bash/tests/integration.spec.ts`` (June 2026), its foreground non-zero-exit
case: the agent loop runs a real ``bash`` for the model's call and the exit code reaches the
model in the result text, not as an error result. (The foreground happy path is acp-agent's
``test_acp_e2e_turns.py::test_acp_bash_tool_turn``.) Ledger: COMPATIBILITY.md § "Upstream unit
tests"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_core import Agent, BashTool, Chunk, CreateOptions, SessionMeta
from dsh_core.testing import InMemorySessionStore, ScriptedModel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _bash_call(command: str) -> list[Chunk]:
    arguments = json.dumps({"command": command, "description": "test command"})
    block = {"type": "tool-call", "id": "call-1", "name": "bash", "arguments": arguments}
    return [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {"type": "block-end", "index": 0, "block": block},  # type: ignore[typeddict-item]
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


def _reply(text: str) -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


async def test_a_non_zero_exit_is_in_the_result_text_not_an_error(tmp_path: Path) -> None:
    store = InMemorySessionStore()
    model = ScriptedModel([[_bash_call("exit 9"), _reply("It failed with code 9.")]])
    agent = Agent(model, store, [BashTool()])
    session = store.create(CreateOptions(meta=SessionMeta(cwd=str(tmp_path))))
    outcome = await agent.run_turn(session, "run exit 9")
    [result] = [e.data for e in session.events if e.type == "tool/result"]
    assert result["isError"] is False
    assert "[exit code: 9]" in result["content"][0]["text"]
    assert outcome.final_text == "It failed with code 9."
    # the model's next request carries the result as a successful tool message
    tool_message = model.requests[1].messages[-1]
    assert tool_message["role"] == "tool"
    assert tool_message["isError"] is False  # type: ignore[typeddict-item]

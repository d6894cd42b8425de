"""The fork backend with core's agent: June's fork recording replayed in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    BashTool,
    Chunk,
    CreateOptions,
    SessionLog,
    SessionMeta,
    SubagentRequest,
    SubagentTool,
    derive_replay_script,
    read_log_text,
)
from dsh_core.testing import (
    InMemorySessionStore,
    ScriptedModel,
    corpus_unavailable,
    normalized_rows,
    upstream_corpus,
)
from dsh_subagent_fork import ForkBackend

pytestmark = pytest.mark.anyio

_CORPUS = upstream_corpus(__file__)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _fixture(scenario: str, name: str) -> SessionLog:
    if _CORPUS is None:
        corpus_unavailable("no upstream corpus found (set DSH_UPSTREAM_CORPUS)")
    path = _CORPUS / "june" / scenario / name
    if not path.is_file():
        corpus_unavailable(f"upstream corpus file {path} is absent (set DSH_UPSTREAM_CORPUS)")
    return read_log_text(path.read_text(encoding="utf-8"), str(path))


def _text(text: str) -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def _fork_call(prompt: str) -> list[Chunk]:
    arguments = json.dumps({"description": "d", "prompt": prompt})
    return [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "block-end",
            "index": 0,
            "block": {
                "type": "tool-call",
                "id": "c1",
                "name": "subagent_fork",
                "arguments": arguments,
            },
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


@pytest.mark.corpus
async def test_subagent_fork_matches_june(tmp_path: Path) -> None:
    primary = _fixture("subagent-fork", "session.jsonl")
    expected_child = _fixture("subagent-fork", "session.1.jsonl")
    seed_length = expected_child.header.effective_seed_length
    store = InMemorySessionStore()
    # The child's own script is what follows its seed: the seeded turn was the parent's.
    model = ScriptedModel(
        [
            derive_replay_script(primary.events),
            derive_replay_script(expected_child.events[seed_length:]),
        ]
    )
    tools = [BashTool(), SubagentTool(ForkBackend())]
    agent = Agent(model, store, tools, AgentConfig(profile="june"))  # June's logs: no header
    parent = store.create(CreateOptions(meta=SessionMeta(cwd=str(tmp_path))))
    for prompt in (
        e.data["content"][0]["text"] for e in primary.events if e.type == "user/message"
    ):
        assert (await agent.run_turn(parent, prompt)).kind == "completed"
    parent.close()
    model.assert_consumed()

    ours = store.load(parent.id)
    assert normalized_rows(ours.header, ours.events) == normalized_rows(
        primary.header, primary.events
    )
    [header] = [h for h in store.list_sessions() if h.id != parent.id]
    child = store.load(header.id)
    # The seed is the parent's log through its last turn/end before the fork call.
    parent_turn1 = [
        e.to_json()
        for e in ours.events[
            : ours.events.index(next(e for e in ours.events if e.type == "turn/end")) + 1
        ]
    ]
    assert header.seed_length == len(parent_turn1) == seed_length
    assert [e.to_json() for e in child.events[:seed_length]] == parent_turn1
    assert child.events[seed_length - 1].type == "turn/end"
    assert child.events[seed_length].data["turn"] == 2
    assert (header.origin, header.delegation_depth, header.parent_session) == (
        "subagent",
        1,
        parent.id,
    )
    got = normalized_rows(header, child.events)
    del got[0]["origin"], got[0]["delegationDepth"]
    assert got == normalized_rows(expected_child.header, expected_child.events)
    # The child's model saw the inherited conversation, then its own prompt.
    child_request = model.requests[2]
    assert child_request.session_id == header.id
    assert [m["role"] for m in child_request.messages] == ["user", "assistant", "user"]


async def test_fork_in_the_first_turn_has_an_empty_seed_and_no_seed_length() -> None:
    store = InMemorySessionStore()
    model = ScriptedModel([[_fork_call("inner"), _text("PARENT")], [_text("CHILD")]])
    agent = Agent(model, store, [SubagentTool(ForkBackend())])
    parent = store.create(CreateOptions(meta=SessionMeta(cwd="/w")))
    outcome = await agent.run_turn(parent, "go")
    assert outcome.final_text == "PARENT"
    [header] = [h for h in store.list_sessions() if h.id != parent.id]
    assert header.seed_length is None
    assert "seedLength" not in header.to_json()
    child = store.load(header.id)
    assert child.events[0].data["turn"] == 1
    assert child.events[1].data["content"] == [{"type": "text", "text": "inner"}]
    result = next(e.data for e in parent.events if e.type == "tool/result")
    assert (result["content"][0]["text"], result["isError"]) == ("CHILD", False)


async def test_fork_of_a_child_is_refused_at_the_june_default_depth() -> None:
    # June's loop allows one level of delegation; the current profile's depth-3 rule is
    # covered in dsh_core's test_agent_subagent_current.py.
    store = InMemorySessionStore()
    model = ScriptedModel(
        [[_fork_call("inner"), _text("PARENT")], [_fork_call("deeper"), _text("CHILD")]]
    )
    agent = Agent(model, store, [SubagentTool(ForkBackend())], AgentConfig(profile="june"))
    parent = store.create(CreateOptions())
    await agent.run_turn(parent, "go")
    headers = store.list_sessions()
    assert len(headers) == 2
    child = store.load(headers[1].id)
    result = next(e.data for e in child.events if e.type == "tool/result")
    assert result["isError"] is True
    assert result["content"][0]["text"] == "delegation depth 2 exceeds the maximum 1"


def test_child_options_seed_the_completed_turns_only() -> None:
    store = InMemorySessionStore()
    parent = store.create(CreateOptions(meta=SessionMeta(cwd="/w", delegation_depth=0)))
    for data_type, data in [
        ("turn/start", {"turn": 1}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ("turn/start", {"turn": 2}),
        ("step/start", {"turn": 2, "step": 1}),
    ]:
        parent.record(data_type, data, time=0)
    backend = ForkBackend()
    options = backend.child_options(parent, SubagentRequest("d", "p"), 1)
    assert [e.type for e in options.seed] == ["turn/start", "turn/end"]
    assert options.meta == SessionMeta(
        cwd="/w", parent_session=parent.id, seed_length=2, origin="subagent", delegation_depth=1
    )
    assert backend.tool_name == "subagent_fork"
    assert "copy of this conversation" in backend.tool_description

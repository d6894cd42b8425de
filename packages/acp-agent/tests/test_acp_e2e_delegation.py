"""End to end: subagent delegation (spawn and fork) through the real agent process."""

from __future__ import annotations

import pytest

from dsh_acp_agent.testing import AgentRun, text_reply, tool_reply
from dsh_core import SessionLog
from dsh_scripted_server import ScriptedModelServer

pytestmark = pytest.mark.e2e


def _child(prompt: str, description: str = "A subtask") -> dict[str, str]:
    return {"description": description, "prompt": prompt}


def _children(run: AgentRun, parent_id: str) -> list[SessionLog]:
    return [log for log in run.logs() if log.header.parent_session == parent_id]


def _wire(log: SessionLog) -> list[dict[str, object]]:
    return [event.to_json() for event in log.events]


def test_acp_spawn_delegation(agent_run: AgentRun, model_server: ScriptedModelServer) -> None:
    arguments = _child("Reply CHILD_OK")
    model_server.add_session(
        [tool_reply(("call_s", "subagent", arguments)), text_reply("PARENT_DONE")]
    )
    model_server.add_session([text_reply("CHILD_OK", reasoning="Easy")])
    with agent_run.start() as agent:
        agent.initialize()
        parent_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(parent_id, "delegate") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    call, result, done = agent.updates()  # the child's own stream is not shown
    assert call == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_s",
        "title": "subagent",
        "kind": "other",
        "status": "in_progress",
        "rawInput": arguments,
    }
    assert result == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_s",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "CHILD_OK"}}],
    }
    assert done["content"]["text"] == "PARENT_DONE"
    [child] = _children(agent_run, parent_id)
    header = child.header
    assert (header.origin, header.delegation_depth, header.seed_length) == ("subagent", 1, None)
    assert header.cwd == str(agent_run.workspace)
    assert child.events[0].type == "turn/start"
    assert child.events[-1].data["reason"] == {"kind": "completed"}


def test_acp_fork_after_a_completed_turn(
    agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    model_server.add_session(
        [
            text_reply("OK"),
            tool_reply(("call_f", "subagent_fork", _child("What is the codeword?"))),
            text_reply("PARENT_DONE"),
        ]
    )
    model_server.add_session([text_reply("MARMALADE")])
    with agent_run.start() as agent:
        agent.initialize()
        parent_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(parent_id, "The codeword is MARMALADE.") == {"stopReason": "end_turn"}
        assert agent.prompt(parent_id, "Fork and ask.") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    assert agent.updates()[2]["content"][0]["content"]["text"] == "MARMALADE"
    parent = agent_run.log(parent_id)
    [child] = _children(agent_run, parent_id)
    seed_length = child.header.seed_length
    assert seed_length is not None
    first_turn_end = next(e.seq for e in parent.events if e.type == "turn/end")
    assert seed_length == first_turn_end + 1
    assert _wire(child)[:seed_length] == _wire(parent)[:seed_length]
    assert child.events[seed_length - 1].type == "turn/end"
    own = child.events[seed_length]
    assert (own.type, own.data["turn"]) == ("turn/start", 2)
    # The child's model request carried the parent's first turn as history.
    child_request = model_server.requests_for(child.header.id)[0]
    assert "MARMALADE" in str(child_request.body)


def test_acp_fork_in_the_first_turn_has_an_empty_seed(
    agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    model_server.add_session(
        [tool_reply(("call_f", "subagent_fork", _child("Say X"))), text_reply("DONE")]
    )
    model_server.add_session([text_reply("X")])
    with agent_run.start() as agent:
        agent.initialize()
        parent_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(parent_id, "fork now") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    [child] = _children(agent_run, parent_id)
    assert child.header.seed_length is None
    assert "seedLength" not in child.header.to_json()
    assert (child.events[0].type, child.events[0].data["turn"]) == ("turn/start", 1)


def test_acp_two_children_in_one_turn_june(
    agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    """June profile: the second delegation starts only after the first one's result."""
    model_server.add_session(
        [
            tool_reply(
                ("call_a", "subagent", _child("Say ALPHA", "First")),
                ("call_b", "subagent", _child("Say BETA", "Second")),
            ),
            text_reply("BOTH_DONE"),
        ]
    )
    model_server.add_session([text_reply("ALPHA")])
    model_server.add_session([text_reply("BETA")])
    with agent_run.start(DSH_LOOP_PROFILE="june") as agent:
        agent.initialize()
        parent_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(parent_id, "two subtasks") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    kinds = [(u["sessionUpdate"], u.get("toolCallId")) for u in agent.updates()]
    assert kinds == [
        ("tool_call", "call_a"),
        ("tool_call_update", "call_a"),
        ("tool_call", "call_b"),
        ("tool_call_update", "call_b"),
        ("agent_message_chunk", None),
    ]
    results = [u["content"][0]["content"]["text"] for u in agent.updates()[1:4:2]]
    assert results == ["ALPHA", "BETA"]
    first, second = _children(agent_run, parent_id)  # ordered by createdAt
    assert first.header.created_at < second.header.created_at
    assert [first.events[-3].data["content"], second.events[-3].data["content"]] == [
        [{"type": "text", "text": "ALPHA"}],
        [{"type": "text", "text": "BETA"}],
    ]


def test_acp_two_children_in_one_turn_current(
    agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    """Current profile: both delegations start before either result; results in model order."""
    model_server.add_session(
        [
            tool_reply(
                ("call_a", "subagent", _child("Say SAME", "First")),
                ("call_b", "subagent", _child("Say SAME", "Second")),
            ),
            text_reply("BOTH_DONE"),
        ]
    )
    # The server hands queued scripts to sessions in the order their first requests arrive,
    # which concurrent children do not fix: both answer the same.
    model_server.add_session([text_reply("SAME")])
    model_server.add_session([text_reply("SAME")])
    with agent_run.start() as agent:
        agent.initialize()
        parent_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(parent_id, "two subtasks") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    kinds = [(u["sessionUpdate"], u.get("toolCallId")) for u in agent.updates()]
    assert kinds == [
        ("tool_call", "call_a"),
        ("tool_call", "call_b"),
        ("tool_call_update", "call_a"),
        ("tool_call_update", "call_b"),
        ("agent_message_chunk", None),
    ]
    parent = agent_run.log(parent_id)
    order = [(e.type, e.data["callId"]) for e in parent.events if e.type.startswith("tool/")]
    assert order == [
        ("tool/call", "call_a"),
        ("tool/call", "call_b"),
        ("tool/result", "call_a"),
        ("tool/result", "call_b"),
    ]
    assert len(_children(agent_run, parent_id)) == 2
    model_server.assert_consumed()


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ("june", "delegation depth 1 exceeds the maximum 0"),
        ("current", "Error: subagent depth 1 exceeds maxDepth 0"),
    ],
)
def test_acp_delegation_over_the_depth_limit(
    agent_run: AgentRun, model_server: ScriptedModelServer, profile: str, message: str
) -> None:
    model_server.add_session(
        [tool_reply(("call_s", "subagent", _child("Say HI"))), text_reply("GAVE_UP")]
    )
    with agent_run.start(DSH_MAX_DELEGATION_DEPTH="0", DSH_LOOP_PROFILE=profile) as agent:
        agent.initialize()
        parent_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(parent_id, "delegate") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    _, result, done = agent.updates()
    assert result["status"] == "failed"
    assert result["content"][0]["content"]["text"] == message
    assert done["content"]["text"] == "GAVE_UP"
    assert _children(agent_run, parent_id) == []
    model_server.assert_consumed()

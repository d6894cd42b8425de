"""Allowances for upstream recordings, and the per-prompt view of a transcript."""

from __future__ import annotations

from typing import Any

from dsh_snapshot import Allowances, TurnSeen, apply_allowances, first_difference, turn_messages

INIT_UPSTREAM: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "protocolVersion": 1,
        "agentInfo": {"name": "deepseek-harness-acp", "version": "0.0.1"},
        "agentCapabilities": {"promptCapabilities": {"image": False}},
        "authMethods": [],
    },
}
INIT_OURS: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "protocolVersion": 1,
        "agentInfo": {"name": "dsh-acp-agent", "version": "0.1.0"},
        "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": False}},
        "authMethods": [],
    },
}


def header(**fields: Any) -> dict[str, Any]:
    return {"type": "session", "version": 0, "id": "{{sessionId}}", "createdAt": 0, **fields}


def test_compat_added_header_fields_are_forgiven_only_where_the_fixture_lacks_them() -> None:
    allow = Allowances(added_header_fields=frozenset({"origin", "delegationDepth"}))
    expected = [[header(parentSession="p")], [header(origin="agent", delegationDepth=2)]]
    actual = [
        [header(parentSession="p", origin="subagent", delegationDepth=1)],
        [header(origin="subagent", delegationDepth=1)],
    ]
    logs, _ = apply_allowances(allow, expected, actual, [], [])
    assert logs[0] == expected[0]
    # Where the fixture has the field, a different value is still a difference.
    diff = first_difference("session.1.jsonl", expected[1], logs[1])
    assert diff is not None
    assert diff.field == "origin"
    assert actual[0][0]["origin"] == "subagent", "the caller's logs are not modified"


def test_compat_unlisted_header_fields_still_differ() -> None:
    allow = Allowances(added_header_fields=frozenset({"origin"}))
    logs, _ = apply_allowances(allow, [[header()]], [[header(seedLength=3)]], [], [])
    diff = first_difference("session.jsonl", [header()], logs[0])
    assert diff is not None
    assert diff.field == "seedLength"


def test_compat_initialize_result_forgives_agent_info_and_capabilities_only() -> None:
    allow = Allowances(initialize_result=True)
    _, frames = apply_allowances(allow, [], [], [INIT_UPSTREAM], [INIT_OURS])
    assert frames == [INIT_UPSTREAM]
    other = {**INIT_OURS, "result": {**INIT_OURS["result"], "protocolVersion": 2}}
    _, frames = apply_allowances(allow, [], [], [INIT_UPSTREAM], [other])
    diff = first_difference("stdout.golden.jsonl", [INIT_UPSTREAM], frames)
    assert diff is not None
    assert diff.field == "result.protocolVersion"


def test_compat_no_allowances_change_nothing() -> None:
    _, frames = apply_allowances(Allowances(), [], [], [INIT_UPSTREAM], [INIT_OURS])
    assert frames == [INIT_OURS]
    assert not Allowances().any


def chunk(text: str) -> dict[str, Any]:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"update": update}}


def thought(text: str) -> dict[str, Any]:
    update = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}}
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"update": update}}


def test_compat_turn_messages_group_text_by_prompt_response() -> None:
    frames: list[Any] = [
        INIT_OURS,
        {"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "{{sessionId}}"}},
        thought("hmm"),
        chunk("P"),
        chunk("ONG"),
        {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}},
        chunk("par"),
        {"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": "boom"}},
        {"jsonrpc": "2.0", "id": 5, "result": {"stopReason": "cancelled"}},
    ]
    assert turn_messages(frames) == [
        TurnSeen("PONG", "end_turn"),
        TurnSeen("par", "error: boom"),
        TurnSeen("", "cancelled"),
    ]
    assert str(TurnSeen("x", "end_turn")) == "end_turn after 'x'"

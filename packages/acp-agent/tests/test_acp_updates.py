"""Event → ``session/update`` mapping, checked against the upstream June stdout fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp.schema import SessionNotification

from dsh_acp_agent import UpdateMapper, replay_updates
from dsh_core import Event, read_log_text

SCENARIOS = [
    "text-turn",
    "multi-turn",
    "tool-call-turn",
    "subagent-spawn",
    "subagent-fork",
    "subagent-multi",
    "cancel",
    "error-finish",
]


def _events(path: Path) -> list[Event]:
    return read_log_text(path.read_text(encoding="utf-8"), str(path)).events


def _golden_updates(path: Path) -> list[str]:
    """The golden ``update`` objects as compact JSON text (key order included)."""
    out: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        frame: dict[str, Any] = json.loads(line)
        if frame.get("method") == "session/update":
            out.append(json.dumps(frame["params"]["update"], separators=(",", ":")))
    return out


@pytest.mark.corpus
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_acp_updates_match_june_stdout(june_corpus: Path, scenario: str) -> None:
    folder = june_corpus / scenario
    mapper = UpdateMapper()
    ours = [
        json.dumps(update, separators=(",", ":"), ensure_ascii=False)
        for event in _events(folder / "session.jsonl")
        for update in mapper.updates_for(event)
    ]
    assert ours == _golden_updates(folder / "stdout.golden.jsonl")


@pytest.mark.corpus
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_acp_updates_are_valid_acp(june_corpus: Path, scenario: str) -> None:
    for update in replay_updates(_events(june_corpus / scenario / "session.jsonl")):
        notification = SessionNotification.model_validate({"sessionId": "s", "update": update})
        dumped = notification.model_dump(mode="json", by_alias=True, exclude_none=True)
        assert dumped["update"] == update


def _event(kind: str, data: dict[str, Any]) -> Event:
    return Event(kind, 0, 0, data)


def _call(name: str, arguments: str, call_id: str = "c1") -> Event:
    return _event(
        "tool/call",
        {"turn": 1, "step": 1, "callId": call_id, "name": name, "arguments": arguments},
    )


def _result(text: str, *, is_error: bool = False, call_id: str = "c1") -> Event:
    return _event(
        "tool/result",
        {
            "turn": 1,
            "step": 1,
            "callId": call_id,
            "content": [{"type": "text", "text": text}],
            "isError": is_error,
        },
    )


def test_acp_bash_call_without_description_is_presented_generically() -> None:
    # Upstream's presentCall validates softly: arguments off the schema get no bash card.
    [update] = UpdateMapper().updates_for(_call("bash", '{"command": "ls -l"}'))
    assert update == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "bash",
        "kind": "execute",
        "status": "in_progress",
        "rawInput": {"command": "ls -l"},
    }


def test_acp_unparsable_arguments_are_passed_raw() -> None:
    [update] = UpdateMapper().updates_for(_call("subagent", '{"prompt": '))
    assert update["rawInput"] == '{"prompt": '
    assert update["title"] == "subagent"
    assert update["kind"] == "other"
    [bash] = UpdateMapper().updates_for(_call("bash", "not json"))
    assert (bash["title"], bash["kind"], bash["rawInput"]) == ("bash", "execute", "not json")


def test_acp_failed_bash_result_is_fenced_and_failed() -> None:
    mapper = UpdateMapper()
    mapper.updates_for(_call("bash", '{"command": "false", "description": "d"}'))
    [update] = mapper.updates_for(_result("out\n[exit code 1]", is_error=True))
    assert update["status"] == "failed"
    assert update["content"] == [
        {
            "type": "content",
            "content": {"type": "text", "text": "```console\nout\n[exit code 1]\n```"},
        }
    ]


def test_acp_other_tool_result_is_plain_text() -> None:
    mapper = UpdateMapper()
    mapper.updates_for(_call("subagent_fork", '{"description": "d", "prompt": "p"}'))
    [update] = mapper.updates_for(_result("ANSWER"))
    assert update["content"][0]["content"]["text"] == "ANSWER"
    assert update["status"] == "completed"


def test_acp_non_delta_chunks_produce_nothing() -> None:
    mapper = UpdateMapper()
    for chunk in (
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "tool-call-delta", "index": 0, "id": "c", "argumentsDelta": "{"},
        {"type": "finish", "reason": {"kind": "stop"}},
    ):
        assert (
            mapper.updates_for(_event("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk}))
            == []
        )
    assert mapper.updates_for(_event("turn/start", {"turn": 1})) == []


def test_acp_replay_shows_user_messages() -> None:
    events = [
        _event(
            "user/message",
            {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        ),
        _event(
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "yo"}},
        ),
    ]
    assert replay_updates(events) == [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "yo"}},
    ]

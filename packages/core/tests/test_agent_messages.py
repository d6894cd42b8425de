"""``messages_from_events``: the model's view of June and later upstream logs."""

from __future__ import annotations

import pytest

from dsh_core import Event, SessionLog, messages_from_events, read_log_text
from dsh_core.testing import corpus_unavailable, upstream_corpus

_CORPUS = upstream_corpus(__file__)


def _log(era: str, scenario: str) -> SessionLog:
    if _CORPUS is None:
        corpus_unavailable("no upstream corpus found (set DSH_UPSTREAM_CORPUS)")
    path = _CORPUS / era / scenario / "session.jsonl"
    if not path.is_file():
        corpus_unavailable(f"upstream corpus file {path} is absent (set DSH_UPSTREAM_CORPUS)")
    return read_log_text(path.read_text(encoding="utf-8"), str(path))


@pytest.mark.corpus
def test_june_tool_call_turn() -> None:
    messages = messages_from_events(_log("june", "tool-call-turn").events)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["content"][1]["type"] == "tool-call"
    assert messages[1]["content"][0]["type"] == "reasoning"
    assert messages[2] == {
        "role": "tool",
        "callId": "call_00_7bmU1TAadx8ADiZJ3BqC9330",
        "content": [{"type": "text", "text": "SNAPSHOT_OK\n"}],
        "isError": False,
    }


@pytest.mark.corpus
def test_head_shapes_are_read_best_effort() -> None:
    messages = messages_from_events(_log("head", "bash-tool-turn").events)
    roles = [m["role"] for m in messages]
    assert roles[0] == "user"
    assert roles[-3:] == ["assistant", "tool", "assistant"]
    tool = messages[-2]
    assert tool["role"] == "tool"
    assert tool["callId"] == "call_00_fkbBRJsUrGKd1pWVc4Gn8233"
    assert tool["content"][0]["text"].startswith("TERMINAL_OK")
    assert messages[-1]["content"][-1] == {"type": "text", "text": "DONE"}


def test_other_events_and_unusable_blocks_are_ignored() -> None:
    events = [
        Event("turn/start", 0, 0, {"turn": 1}),
        Event(
            "user/message",
            1,
            0,
            {"content": [{"type": "image", "data": "x"}, {"type": "text", "text": "hi"}]},
        ),
        Event("user/message", 2, 0, {"content": [{"type": "image", "data": "x"}]}),
        Event("assistant/chunk", 3, 0, {"turn": 1, "step": 1, "chunk": {}}),
        Event(
            "assistant/message",
            4,
            0,
            {"content": [{"type": "weird"}, "junk", {"type": "text", "text": "yo"}]},
        ),
        Event(
            "tool/result",
            5,
            0,
            {
                "message": {
                    "content": [
                        {
                            "type": "tool-result",
                            "toolCallId": "t1",
                            "isError": True,
                            "content": [{"type": "text", "text": "bad"}],
                        },
                        {"type": "other"},
                        7,
                    ]
                }
            },
        ),
        Event("some/future-event", 6, 0, {"content": [{"type": "text", "text": "no"}]}),
        Event("tool/result", 7, 0, {"callId": "t2", "content": "not a list"}),
    ]
    assert messages_from_events(events) == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "yo"}]},
        {
            "role": "tool",
            "callId": "t1",
            "content": [{"type": "text", "text": "bad"}],
            "isError": True,
        },
        {"role": "tool", "callId": "t2", "content": [], "isError": False},
    ]

"""Upstream's ``llm-deepseek/tests/serialize.spec.ts`` (June 2026), the cases today's request
contract (head's ``serialize.ts``) keeps, as conformance cases for :func:`build_body`. Ledger:
COMPATIBILITY.md § "Upstream unit tests" (the rest are not applicable there, one line why).
"""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core import Message, ModelRequest, ToolSpec
from dsh_llm_deepseek._settings import thinking_fields
from dsh_llm_openai._request import build_body

_HI: Message = {"role": "user", "content": [{"type": "text", "text": "hi"}]}


def _body(*messages: Message, **request: Any) -> dict[str, Any]:
    options = {k: v for k, v in request.items() if k in ("tools", "system")}
    effort = request.get("effort")
    return build_body(
        ModelRequest("s", list(messages), **options),
        model="deepseek-chat",
        max_tokens=request.get("max_tokens"),
        extra=thinking_fields(effort),
        reasoning_pass_back=True,  # DeepSeek's profile
    )


def _call(call_id: str, name: str) -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": "{}"}


@pytest.mark.parametrize(
    ("case", "message", "wire"),
    [
        ("maps user text to string content", _HI, {"role": "user", "content": "hi"}),
        (
            "maps plain assistant text without reasoning_content",
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
            {"role": "assistant", "content": "a"},
        ),
        (
            "turns tool results into role:tool messages",
            {
                "role": "tool",
                "callId": "call-1",
                "content": [{"type": "text", "text": "Sunny 22C"}],
                "isError": False,
            },
            {"role": "tool", "tool_call_id": "call-1", "content": "Sunny 22C"},
        ),
        (
            "sends a sentinel for empty tool-result content",
            {"role": "tool", "callId": "call-1", "content": [], "isError": False},
            {"role": "tool", "tool_call_id": "call-1", "content": "(no output)"},
        ),
        (
            "emits an empty user message rather than dropping block-less messages",
            {"role": "user", "content": []},
            {"role": "user", "content": ""},
        ),
    ],
)
def test_serialize_messages(case: str, message: Message, wire: dict[str, Any]) -> None:
    assert _body(message)["messages"] == [wire], case


def test_parallel_tool_calls_keep_their_order() -> None:
    message: Message = {"role": "assistant", "content": [_call("a", "one"), _call("b", "two")]}  # type: ignore[list-item]
    [assistant] = _body(message)["messages"]
    assert [call["id"] for call in assistant["tool_calls"]] == ["a", "b"]
    assert assistant["content"] == ""  # tool-call turns carry empty-string content, not null


def test_always_streams_with_usage_and_maps_the_basics() -> None:
    body = _body(_HI, max_tokens=100)
    assert body["model"] == "deepseek-chat"
    assert (body["stream"], body["stream_options"]) == (True, {"include_usage": True})
    assert body["max_tokens"] == 100
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_prepends_the_system_prompt() -> None:
    assert _body(_HI, system="be brief")["messages"][0] == {
        "role": "system",
        "content": "be brief",
    }


def test_tools_map_to_functions_and_an_empty_tools_array_is_omitted() -> None:
    tool: ToolSpec = {
        "name": "a",
        "description": "A",
        "parameters": {"type": "object", "properties": {}},
    }
    assert _body(_HI, tools=[tool])["tools"] == [{"type": "function", "function": dict(tool)}]
    assert "tools" not in _body(_HI, tools=[])


@pytest.mark.parametrize(
    ("effort", "fields"),
    [
        ("high", {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
        ("off", {"thinking": {"type": "disabled"}}),
        (None, {}),
    ],
    ids=["applies thinking and effort", "off disables thinking", "unset sends neither"],
)
def test_thinking_fields(effort: Any, fields: dict[str, Any]) -> None:
    body = _body(_HI, effort=effort)
    assert {k: body[k] for k in ("thinking", "reasoning_effort") if k in body} == fields

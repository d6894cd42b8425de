"""Upstream's serialize.spec.ts and translate.spec.ts cases that apply here, table-driven.

Source: ../shared/upstream-src/head/packages/llm/llm-deepseek/tests/. Where we deliberately
differ the case says so (``reasoning_content: ""`` on a tool-call turn without reasoning, which
the live thinking mode requires; failures raised as ``ModelError`` since our finish chunk
carries no failure).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_core import Chunk, Message, ModelRequest
from dsh_llm_deepseek._settings import thinking_fields
from dsh_llm_openai._failures import finish_failure
from dsh_llm_openai._request import build_body
from dsh_llm_openai._stream import ChunkMapper

USER: Message = {"role": "user", "content": [{"type": "text", "text": "hi"}]}


def _call(call_id: str, name: str = "bash", arguments: str = "{}") -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def _wire_call(call_id: str, name: str = "bash", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# --- serialize.spec.ts -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "wire"),
    [
        pytest.param(USER, {"role": "user", "content": "hi"}, id="user text is a string"),
        pytest.param(
            {
                "role": "assistant",
                "content": [{"type": "reasoning", "text": "think"}, {"type": "text", "text": "a"}],
            },
            {"role": "assistant", "content": "a", "reasoning_content": "think"},
            id="reasoning passback on a tool-call-free turn",
        ),
        pytest.param(
            {"role": "assistant", "content": [{"type": "reasoning", "text": "t"}, _call("c1")]},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "t",
                "tool_calls": [_wire_call("c1")],
            },
            id="reasoning passback on a tool-call turn",
        ),
        pytest.param(
            {"role": "assistant", "content": [_call("c1")]},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "",
                "tool_calls": [_wire_call("c1")],
            },
            id="ours: a tool-call turn without reasoning sends an empty reasoning_content",
        ),
        pytest.param(
            {"role": "assistant", "content": [_call("c1", "a"), _call("c2", "b", '{"x":1}')]},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "",
                "tool_calls": [_wire_call("c1", "a"), _wire_call("c2", "b", '{"x":1}')],
            },
            id="parallel tool calls in order",
        ),
        pytest.param(
            {
                "role": "tool",
                "callId": "c1",
                "content": [{"type": "text", "text": "out"}],
                "isError": False,
            },
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
            id="tool results are role tool",
        ),
        pytest.param(
            {"role": "assistant", "content": []},
            {"role": "assistant", "content": ""},
            id="content-less assistant message is empty string, never null",
        ),
        pytest.param(
            {"role": "assistant", "content": [{"type": "reasoning", "text": "only"}]},
            {"role": "assistant", "content": "", "reasoning_content": "only"},
            id="reasoning-only assistant message",
        ),
    ],
)
def test_serialize_messages(message: Message, wire: dict[str, Any]) -> None:
    request = ModelRequest(session_id="s", messages=[message])
    body = build_body(request, model="m", max_tokens=None, reasoning_pass_back=True)
    assert body["messages"] == [wire]


@pytest.mark.parametrize(
    ("effort", "fields"),
    [
        pytest.param("off", {"thinking": {"type": "disabled"}}, id="off is disabled, no effort"),
        pytest.param(
            "max", {"thinking": {"type": "enabled"}, "reasoning_effort": "max"}, id="max enables"
        ),
        pytest.param(
            "low", {"thinking": {"type": "enabled"}, "reasoning_effort": "low"}, id="low enables"
        ),
        pytest.param(None, {}, id="unset puts nothing on the wire"),
    ],
)
def test_serialize_thinking(effort: Any, fields: dict[str, Any]) -> None:
    request = ModelRequest(session_id="s", messages=[USER], system="sys")
    body = build_body(request, model="m", max_tokens=7, extra=thinking_fields(effort))
    assert {k: body[k] for k in ("thinking", "reasoning_effort") if k in body} == fields
    # Always streams with usage; the system prompt comes first; no empty tools array.
    assert (body["stream"], body["stream_options"], body["max_tokens"]) == (
        True,
        {"include_usage": True},
        7,
    )
    assert body["messages"][0] == {"role": "system", "content": "sys"}
    assert "tools" not in body


# --- translate.spec.ts -------------------------------------------------------------------------


def _delta(finish: str | None = None, **delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _usage(prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
    return {
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, **extra},
    }


def _translate(events: list[dict[str, Any]]) -> tuple[list[Chunk], str | None]:
    mapper = ChunkMapper()
    chunks: list[Chunk] = []
    for event in events:
        chunks.extend(mapper.feed(json.loads(json.dumps(event))))
    failure = finish_failure(mapper.finish_reason, mapper.block_count)
    chunks.extend(mapper.end(finish=failure is None))
    return chunks, None if failure is None else failure.error.code


def _types(chunks: list[Chunk]) -> list[str]:
    return [c["type"] for c in chunks]


@pytest.mark.parametrize(
    ("events", "types", "code"),
    [
        pytest.param(
            [_delta(content="he"), _delta("stop", content="llo")],
            ["block-start", "text-delta", "text-delta", "block-end", "finish"],
            None,
            id="text block, finish deferred to the end",
        ),
        pytest.param(
            [_delta(reasoning_content=""), _delta("stop", content="a")],
            ["block-start", "text-delta", "block-end", "finish"],
            None,
            id="the empty first reasoning chunk opens no block",
        ),
        pytest.param(
            [_delta(reasoning_content="r"), _delta("stop", content="a")],
            [
                *("block-start", "reasoning-delta", "block-start", "text-delta"),
                *("block-end", "block-end", "finish"),
            ],
            None,
            id="reasoning then text are separate blocks",
        ),
        pytest.param(
            [_delta(), _usage(10, 2), _delta("stop", content="a")],
            ["block-start", "text-delta", "block-end", "usage", "finish"],
            None,
            id="chunks with no choices, and a trailing usage-only chunk",
        ),
        pytest.param(
            [_delta("stop", content=""), _usage(10, 0)],
            ["usage"],
            "EMPTY_RESPONSE",
            id="explicit stop with no opened block is EMPTY_RESPONSE, after usage",
        ),
        pytest.param(
            [_delta("stop", reasoning_content="only")],
            ["block-start", "reasoning-delta", "block-end", "finish"],
            None,
            id="a reasoning-only stream is a successful stop",
        ),
        pytest.param(
            [_delta("length", content="")],
            ["finish"],
            None,
            id="non-stop finishes with no block stay unclassified",
        ),
        pytest.param(
            [_delta(content="a"), _delta("content_filter")],
            ["block-start", "text-delta", "block-end"],
            "CONTENT_FILTER",
            id="content_filter",
        ),
        pytest.param(
            [_delta("insufficient_system_resource")],
            [],
            "INSUFFICIENT_SYSTEM_RESOURCE",
            id="insufficient_system_resource",
        ),
        pytest.param(
            [_delta(content="a"), _delta("brand_new_reason")],
            ["block-start", "text-delta", "block-end"],
            "BRAND_NEW_REASON",
            id="unknown reasons become upper-cased codes",
        ),
    ],
)
def test_translate(events: list[dict[str, Any]], types: list[str], code: str | None) -> None:
    chunks, failure = _translate(events)
    assert (_types(chunks), failure) == (types, code)


def test_translate_fragmented_and_parallel_tool_calls() -> None:
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "bash"}}
    other = {"index": 1, "id": "c2", "type": "function", "function": {"name": "ls"}}
    chunks, failure = _translate(
        [
            _delta(tool_calls=[{**call, "function": {"name": "bash", "arguments": '{"co'}}]),
            _delta(tool_calls=[other]),
            _delta(tool_calls=[{"index": 0, "function": {"arguments": 'mmand":1}'}}]),
            _delta("tool_calls", tool_calls=[{"index": 1, "function": {"arguments": "{}"}}]),
        ]
    )
    assert failure is None
    ends = [c["block"] for c in chunks if c["type"] == "block-end"]
    assert ends == [
        {"type": "tool-call", "id": "c1", "name": "bash", "arguments": '{"command":1}'},
        {"type": "tool-call", "id": "c2", "name": "ls", "arguments": "{}"},
    ]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


@pytest.mark.parametrize(
    ("usage", "mapped"),
    [
        pytest.param(
            {
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "prompt_cache_hit_tokens": 60,
                "prompt_cache_miss_tokens": 40,
                "prompt_tokens_details": {"cached_tokens": 60},
                "completion_tokens_details": {"reasoning_tokens": 12},
            },
            (40, 20, 60, 12),
            id="the full live-capture shape",
        ),
        pytest.param(
            {"prompt_tokens": 100, "completion_tokens": 5, "prompt_cache_hit_tokens": 30},
            (70, 5, 30, 0),
            id="prompt_cache_hit_tokens without details",
        ),
        pytest.param(
            {"prompt_tokens": 9, "completion_tokens": 1}, (9, 1, 0, 0), id="optional fields absent"
        ),
    ],
)
def test_map_usage(usage: dict[str, Any], mapped: tuple[int, int, int, int]) -> None:
    chunks, _ = _translate([_delta("stop", content="a"), {"choices": [], "usage": usage}])
    [counts] = [c["usage"] for c in chunks if c["type"] == "usage"]
    assert (
        counts["inputTokens"],
        counts["outputTokens"],
        counts["cacheReadTokens"],
        counts["reasoningTokens"],
    ) == mapped


def test_last_usage_wins() -> None:
    chunks, _ = _translate([_usage(1, 1), _delta("stop", content="a"), _usage(50, 7)])
    [counts] = [c["usage"] for c in chunks if c["type"] == "usage"]
    assert (counts["inputTokens"], counts["outputTokens"]) == (50, 7)

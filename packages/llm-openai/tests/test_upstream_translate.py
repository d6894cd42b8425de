"""Upstream's ``llm-deepseek/tests/translate.spec.ts`` (June 2026): chat-completion events to
stream chunks, as conformance cases for :class:`ChunkMapper` (and :func:`finish_failure`, the
finish-reason classification). Ledger: COMPATIBILITY.md § "Upstream unit tests".

Deliberate differences (not ported): a stream with no ``finish_reason`` is a ``PROTOCOL``
error in ours, not a silent ``stop`` (``test_wire_retries.py``); a new tool call without an
``id`` is a ``PROTOCOL`` error, since its result could not be paired with it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_core import Chunk, ModelError
from dsh_llm_openai._failures import finish_failure
from dsh_llm_openai._stream import ChunkMapper, decode_event

# The live first-chunk signature: role + null content + EMPTY reasoning.
_FIRST = {"choices": [{"delta": {"role": "assistant", "content": None, "reasoning_content": ""}}]}


def _d(finish: str | None = None, **delta: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"delta": delta}
    if finish is not None:
        choice["finish_reason"] = finish
    return {"choices": [choice]}


def _translate(*events: dict[str, Any]) -> list[Chunk]:
    mapper = ChunkMapper()
    chunks: list[Chunk] = []
    for event in events:
        chunks.extend(mapper.feed(decode_event(json.dumps(event))))
    failure = finish_failure(mapper.finish_reason, mapper.block_count)
    chunks.extend(mapper.end(finish=failure is None))
    return chunks


def _call(**fields: Any) -> dict[str, Any]:
    return _d(tool_calls=[fields])


def test_streams_a_text_block_and_defers_finish_to_the_end() -> None:
    final = _d("stop", content="") | {"usage": {"prompt_tokens": 5, "completion_tokens": 2}}
    chunks = _translate(_FIRST, _d(content="Hel"), _d(content="lo"), final)
    assert chunks == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Hel"},
        {"type": "text-delta", "index": 0, "text": "lo"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello"}},
        {
            "type": "usage",
            "usage": {
                "inputTokens": 5,
                "outputTokens": 2,
                "cacheReadTokens": 0,
                "reasoningTokens": 0,
            },
        },
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def test_assembles_into_the_message_the_loop_expects() -> None:
    chunks = _translate(_FIRST, _d(content="hi"), _d("stop"))
    assert [c["block"] for c in chunks if c["type"] == "block-end"] == [
        {"type": "text", "text": "hi"}
    ]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}


@pytest.mark.parametrize(
    ("case", "events", "starts"),
    [
        (
            "does NOT open a reasoning block for the empty first-chunk signature",
            [_FIRST, _d(content="plain"), _d("stop")],
            ["text"],
        ),
        (
            "streams reasoning then text as separate blocks",
            [_FIRST, _d(reasoning_content="think"), _d(content="answer"), _d("stop")],
            ["reasoning", "text"],
        ),
        (
            "treats an entirely absent reasoning_content field as non-thinking",
            [_d(role="assistant", content="x"), _d("stop")],
            ["text"],
        ),
        (
            "interleaves text and tool-call blocks with distinct indices",
            [
                _FIRST,
                _d(content="Checking."),
                _call(index=0, id="c", type="function", function={"name": "f", "arguments": "{}"}),
                _d("tool_calls"),
            ],
            ["text", "tool-call"],
        ),
    ],
)
def test_blocks_open_in_order(case: str, events: list[dict[str, Any]], starts: list[str]) -> None:
    chunks = _translate(*events)
    opened = [(c["index"], c["blockType"]) for c in chunks if c["type"] == "block-start"]
    assert opened == list(enumerate(starts)), case


def test_reassembles_a_tool_call_from_fragmented_argument_deltas() -> None:
    chunks = _translate(
        _FIRST,
        _call(index=0, id="call_1", type="function", function={"name": "bash", "arguments": ""}),
        _call(index=0, function={"arguments": '{"comm'}),
        _call(index=0, function={"arguments": 'and":"ls"}'}),
        _d("tool_calls"),
    )
    [end] = [c for c in chunks if c["type"] == "block-end"]
    assert end["block"] == {
        "type": "tool-call",
        "id": "call_1",
        "name": "bash",
        "arguments": '{"command":"ls"}',
    }
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


def test_disambiguates_parallel_tool_calls_by_wire_index() -> None:
    chunks = _translate(
        _FIRST,
        _call(index=0, id="a", type="function", function={"name": "f", "arguments": '{"x":'}),
        _call(index=1, id="b", type="function", function={"name": "g", "arguments": '{"y":'}),
        _call(index=0, function={"arguments": "1}"}),
        _call(index=1, function={"arguments": "2}"}),
        _d("tool_calls"),
    )
    assert [c["block"] for c in chunks if c["type"] == "block-end"] == [
        {"type": "tool-call", "id": "a", "name": "f", "arguments": '{"x":1}'},
        {"type": "tool-call", "id": "b", "name": "g", "arguments": '{"y":2}'},
    ]


def _usages(chunks: list[Chunk]) -> list[tuple[int, int]]:
    return [
        (c["usage"]["inputTokens"], c["usage"]["outputTokens"])
        for c in chunks
        if c["type"] == "usage"
    ]


def test_takes_usage_from_a_trailing_usage_only_chunk() -> None:
    chunks = _translate(
        _FIRST,
        _d(content="x"),
        _d("stop") | {"usage": None},
        {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 1}},
    )
    assert _usages(chunks) == [(9, 1)]
    assert [c["type"] for c in chunks[-2:]] == ["usage", "finish"]


def test_last_usage_wins_when_attached_and_trailing_both_arrive() -> None:
    chunks = _translate(
        _FIRST,
        _d(content="x"),
        _d("stop") | {"usage": {"prompt_tokens": 1, "completion_tokens": 1}},
        {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 2}},
    )
    assert _usages(chunks) == [(2, 2)]


def test_omits_the_usage_chunk_when_none_arrived() -> None:
    assert _usages(_translate(_FIRST, _d("stop", content="x"))) == []


def test_invalid_json_payloads_are_a_malformed_stream_error() -> None:
    with pytest.raises(ModelError, match="malformed stream") as caught:
        decode_event("{bad json")
    assert caught.value.code == "PROTOCOL"


@pytest.mark.parametrize(
    ("wire", "kind"),
    [("stop", "stop"), ("tool_calls", "tool-calls"), ("length", "max-tokens")],
)
def test_map_finish_reason(wire: str, kind: str) -> None:
    chunks = _translate(_FIRST, _d(wire, content="x"))
    assert chunks[-1] == {"type": "finish", "reason": {"kind": kind}}


@pytest.mark.parametrize("wire", ["content_filter", "insufficient_system_resource", "mystery"])
def test_other_finish_reasons_are_errors_with_the_wire_code(wire: str) -> None:
    mapper = ChunkMapper()
    mapper.feed(_d(wire, content="x"))
    failure = finish_failure(mapper.finish_reason, mapper.block_count)
    assert failure is not None
    assert failure.error.code == wire.upper()
    assert wire in str(failure.error)


@pytest.mark.parametrize(
    ("case", "usage", "mapped"),
    [
        (
            "maps the full live-capture shape",
            {
                "prompt_tokens": 283,
                "completion_tokens": 69,
                "prompt_cache_hit_tokens": 256,
                "prompt_cache_miss_tokens": 27,
                "prompt_tokens_details": {"cached_tokens": 256},
                "completion_tokens_details": {"reasoning_tokens": 24},
            },
            (27, 69, 256, 24),
        ),
        (
            "falls back to prompt_cache_hit_tokens when details are absent",
            {"prompt_tokens": 10, "completion_tokens": 2, "prompt_cache_hit_tokens": 8},
            (2, 2, 8, 0),
        ),
        (
            "optional fields the wire omits count zero",
            {"prompt_tokens": 10, "completion_tokens": 2},
            (10, 2, 0, 0),
        ),
    ],
)
def test_map_usage(case: str, usage: dict[str, Any], mapped: tuple[int, ...]) -> None:
    chunks = _translate(_FIRST, _d("stop", content="x"), {"choices": [], "usage": usage})
    [counts] = [c["usage"] for c in chunks if c["type"] == "usage"]
    assert (
        counts["inputTokens"],
        counts["outputTokens"],
        counts["cacheReadTokens"],
        counts["reasoningTokens"],
    ) == mapped, case


@pytest.mark.parametrize(
    ("case", "call", "delta"),
    [
        (
            "a function object but no arguments field",
            {"index": 0, "id": "c", "type": "function", "function": {"name": "f"}},
            {"type": "tool-call-delta", "index": 0, "id": "c", "name": "f", "argumentsDelta": ""},
        ),
        (
            "no function object at all",
            {"index": 0, "id": "c"},
            {"type": "tool-call-delta", "index": 0, "id": "c", "argumentsDelta": ""},
        ),
    ],
)
def test_defensive_tool_call_branches(
    case: str, call: dict[str, Any], delta: dict[str, Any]
) -> None:
    chunks = _translate(_FIRST, _d(tool_calls=[call]), _d("tool_calls"))
    assert chunks[1] == delta, case

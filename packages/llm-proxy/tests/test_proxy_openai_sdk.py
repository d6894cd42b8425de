"""The official ``openai`` SDK through the proxy: record against the scripted upstream, replay
with it stopped, identical outputs; the logs hold the expected session tree."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from dsh_core import Chunk
from dsh_llm_proxy import ProxyServer
from dsh_llm_replay import derive_replay_script

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def _client(base_url: str) -> openai.OpenAI:
    # The dummy key is all the client holds; the proxy adds the real one upstream.
    return openai.OpenAI(base_url=base_url, api_key="dummy-client-key", max_retries=0)


def _streamed_text(client: openai.OpenAI, messages: list[Any]) -> list[str]:
    stream = client.chat.completions.create(model="m", messages=messages, stream=True)
    return [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]


def _conversation(client: openai.OpenAI) -> dict[str, Any]:
    history: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
    ]
    first = client.chat.completions.create(model="m", messages=history, tools=TOOLS)
    message = first.choices[0].message
    calls = [c for c in message.tool_calls or [] if c.type == "function"]
    history.append(message.model_dump(exclude_none=True))
    for call in calls:
        city = json.loads(call.function.arguments)["city"]
        history.append({"role": "tool", "tool_call_id": call.id, "content": f"{city}: ok"})
    second = _streamed_text(client, history)
    history.append({"role": "assistant", "content": "".join(second)})
    third = _streamed_text(client, [*history, {"role": "user", "content": "Umbrella?"}])
    forked = client.chat.completions.create(
        model="m", messages=[*history, {"role": "user", "content": "Sunglasses?"}]
    )
    return {
        "calls": [(c.id, c.function.name, c.function.arguments) for c in calls],
        "finish": first.choices[0].finish_reason,
        "usage": first.usage.model_dump() if first.usage else None,
        "second": second,
        "third": third,
        "forked": forked.choices[0].message.content,
    }


def test_streaming_and_not_with_parallel_tool_calls_and_a_fork(
    roundtrip: Any,
    make_text: Callable[..., list[Chunk]],
    make_tool_calls: Callable[..., list[Chunk]],
) -> None:
    main = [
        make_tool_calls(
            ("call_a", "weather", {"city": "Paris"}), ("call_b", "weather", {"city": "Rome"})
        ),
        make_text(["Paris ", "is ", "sunny, ", "Rome ", "rainy."]),
        make_text(["Bring ", "an ", "umbrella."]),
    ]
    fork = [make_text(["Wear ", "sunglasses."])]

    def run(base_url: str) -> dict[str, Any]:
        with _client(base_url) as client:
            return _conversation(client)

    result = roundtrip([main, fork], run)
    assert result.recorded == result.replayed
    assert result.recorded["second"] == ["Paris ", "is ", "sunny, ", "Rome ", "rainy."]
    assert [c[0] for c in result.recorded["calls"]] == ["call_a", "call_b"]
    assert result.recorded["finish"] == "tool_calls"
    assert result.recorded["forked"] == "Wear sunglasses."
    assert result.upstream_requests == 4

    parent, child = result.headers()
    assert parent.parent_session is None
    assert parent.seed_length is None
    assert child.parent_session == parent.id
    parent_events = result.events(parent.id)
    turn_ends = [e.seq for e in parent_events if e.type == "turn/end"]
    # The fork shares the first turn (tool calls, results, answer) and diverges after it.
    assert child.seed_length == turn_ends[0] + 1
    child_events = result.events(child.id)
    assert [e.to_json() for e in child_events[: child.seed_length]] == [
        e.to_json() for e in parent_events[: child.seed_length]
    ]
    assert child_events[child.seed_length].type == "turn/start"
    assert len(derive_replay_script(parent_events)) == 3
    assert len(derive_replay_script(child_events[child.seed_length :])) == 1
    results = [e.data for e in parent_events if e.type == "tool/result"]
    assert [(r["callId"], r["content"][0]["text"]) for r in results] == [
        ("call_a", "Paris: ok"),
        ("call_b", "Rome: ok"),
    ]


def test_the_upstream_gets_the_proxy_key_and_the_log_never_holds_a_key(
    roundtrip: Any, make_text: Callable[..., list[Chunk]], upstream_key: str
) -> None:
    def run(base_url: str) -> str | None:
        with _client(base_url) as client:
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        return reply.choices[0].message.content

    # The scripted upstream answers 401 to any other key, so success proves the proxy's key.
    result = roundtrip([[make_text(["hello"])]], run)
    assert result.recorded == "hello"
    for path in result.root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert upstream_key.encode() not in data
            assert b"dummy-client-key" not in data


def test_replay_errors_reach_the_sdk_as_clear_http_errors(
    roundtrip: Any, make_text: Callable[..., list[Chunk]]
) -> None:
    hello: list[Any] = [{"role": "user", "content": "once"}]

    def run(base_url: str) -> str | None:
        with _client(base_url) as client:
            reply = client.chat.completions.create(model="m", messages=hello)
        return reply.choices[0].message.content

    result = roundtrip([[make_text(["one"])]], run)
    with ProxyServer.replay(result.root) as proxy, _client(proxy.base_url) as client:
        assert run(proxy.base_url) == "one"
        more: list[Any] = [
            *hello,
            {"role": "assistant", "content": "one"},
            {"role": "user", "content": "+"},
        ]
        with pytest.raises(openai.UnprocessableEntityError, match="script-exhausted"):
            client.chat.completions.create(model="m", messages=more, stream=True)
        with pytest.raises(openai.UnprocessableEntityError, match="unrecorded-session"):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "never recorded"}]
            )
        report = httpx.get(proxy.report_url).json()
    assert report["ok"] is False
    assert [e["kind"] for e in report["errors"]] == ["script-exhausted", "unrecorded-session"]


def test_a_replay_that_stops_early_is_reported(
    roundtrip: Any, make_text: Callable[..., list[Chunk]]
) -> None:
    def run(base_url: str) -> list[str | None]:
        with _client(base_url) as client:
            return _two_calls(client)

    result = roundtrip([[make_text(["1"]), make_text(["2"])]], run)
    assert result.replayed == ["1", "2"]
    with ProxyServer.replay(result.root) as proxy, _client(proxy.base_url) as client:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        problems = proxy.problems()
    assert len(problems) == 1
    assert "made 1 of 2 recorded calls" in problems[0]


def _two_calls(client: openai.OpenAI) -> list[str | None]:
    messages: list[Any] = [{"role": "user", "content": "a"}]
    first = client.chat.completions.create(model="m", messages=messages)
    messages += [{"role": "assistant", "content": "1"}, {"role": "user", "content": "b"}]
    second = client.chat.completions.create(model="m", messages=messages)
    return [first.choices[0].message.content, second.choices[0].message.content]


def test_a_changed_prompt_is_a_replay_error_not_a_stale_answer(
    roundtrip: Any, make_text: Callable[..., list[Chunk]]
) -> None:
    result = roundtrip([[make_text(["1"]), make_text(["2"])]], _run_two_calls)
    with ProxyServer.replay(result.root) as proxy, _client(proxy.base_url) as client:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        changed: list[Any] = [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "1"},
            {"role": "user", "content": "b, but reworded"},
        ]
        with pytest.raises(openai.UnprocessableEntityError, match="differ from the recording"):
            client.chat.completions.create(model="m", messages=changed)
        report = proxy.report()
    assert report.ok is False
    assert any('recorded "user: b", got "user: b, but reworded"' in p for p in report.problems)


def test_a_long_changed_message_shows_where_it_differs_on_both_sides(
    roundtrip: Any, make_text: Callable[..., list[Chunk]]
) -> None:
    prefix = "lorem ipsum " * 150

    def run(base_url: str) -> str | None:
        with _client(base_url) as client:
            messages: list[Any] = [{"role": "user", "content": prefix + "RECORDED tail"}]
            reply = client.chat.completions.create(model="m", messages=messages)
            return reply.choices[0].message.content

    result = roundtrip([[make_text(["1"])]], run)
    with ProxyServer.replay(result.root) as proxy, _client(proxy.base_url) as client:
        changed: list[Any] = [{"role": "user", "content": prefix + "CHANGED tail"}]
        with pytest.raises(openai.UnprocessableEntityError):
            client.chat.completions.create(model="m", messages=changed)
        (problem,) = proxy.report().problems
    recorded, got = problem.split("recorded ", 1)[1].split(", got ")
    assert "RECORDED tail" in recorded
    assert "CHANGED tail" in got
    assert f"(char {len('user: ' + prefix)})" in got


def _run_two_calls(base_url: str) -> list[str | None]:
    with _client(base_url) as client:
        return _two_calls(client)


def test_the_end_marker_inside_a_models_text_is_only_text(
    roundtrip: Any, make_text: Callable[..., list[Chunk]]
) -> None:
    words = ["An SSE stream ends with\n", "data: [DONE]", "\n\n", "then closes."]

    def run(base_url: str) -> list[str]:
        with _client(base_url) as client:
            return _streamed_text(client, [{"role": "user", "content": "How does SSE end?"}])

    result = roundtrip([[make_text(words)]], run)
    assert result.recorded == result.replayed == words
    (header,) = result.headers()
    kinds = [
        e.data["chunk"]["type"] for e in result.events(header.id) if e.type == "assistant/chunk"
    ]
    assert kinds.count("text-delta") == 4
    assert kinds[-1] == "finish"


def _tool_call(client: openai.OpenAI, system: str, tools: list[Any], model: str = "m") -> None:
    messages: list[Any] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "weather?"},
    ]
    client.chat.completions.create(model=model, messages=messages, tools=tools)


def _with_city_description(text: str) -> list[Any]:
    tools = json.loads(json.dumps(TOOLS))
    tools[0]["function"]["parameters"]["properties"]["city"]["description"] = text
    return tools


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (
            {"model": "m2"},
            'call 1: request drift: config.model: expected "m", actual "m2"',
        ),
        (
            {"system": "You are verbose."},
            'call 1: request drift: system: expected "You are terse.", actual "You are verbose."',
        ),
        (
            {"tools": _with_city_description("A city name.")},
            "call 1: request drift: tools[weather].function.parameters.properties.city"
            '.description: expected (absent), actual "A city name."',
        ),
    ],
)
def test_a_changed_model_prompt_or_tool_is_request_drift(
    roundtrip: Any, make_text: Callable[..., list[Chunk]], change: dict[str, Any], where: str
) -> None:
    def record(base_url: str) -> None:
        with _client(base_url) as client:
            _tool_call(client, "You are terse.", TOOLS)

    result = roundtrip([[make_text(["sunny"])]], record)
    live: dict[str, Any] = {"system": "You are terse.", "tools": TOOLS} | change
    with ProxyServer.replay(result.root) as proxy, _client(proxy.base_url) as client:
        with pytest.raises(openai.UnprocessableEntityError, match="request drift"):
            _tool_call(client, **live)
        report = proxy.report()
    assert report.ok is False
    assert any(where in p for p in report.problems), report.problems

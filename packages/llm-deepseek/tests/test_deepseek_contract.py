"""The client against the strict contract server playing DeepSeek: today's API (its models,
thinking fields and the rules it enforces). The failure modes of a live stream are the wire's
(``dsh-llm-openai``'s ``test_wire_contract``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from dsh_core import Chunk, Message, ModelError, ModelRequest
from dsh_llm_deepseek import DeepSeekClient, DeepSeekSettings
from dsh_llm_deepseek.testing import ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., DeepSeekSettings]

TEXT: list[Chunk] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "fine"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "fine"}},
    {"type": "finish", "reason": {"kind": "stop"}},
]
USER: list[Message] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
TOOL_TURN: list[Message] = [
    *USER,
    {
        "role": "assistant",
        "content": [{"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}],
    },
    {"role": "tool", "callId": "c1", "content": [{"type": "text", "text": "ok"}], "isError": False},
]


# --- today's contract --------------------------------------------------------------------------


async def test_the_default_request_passes_the_strict_server(
    make_settings: SettingsFactory,
) -> None:
    with ScriptedModelServer([[TEXT]], strict=True) as server:
        async with DeepSeekClient(make_settings(server.base_url)) as client:
            request = ModelRequest(session_id="s", messages=TOOL_TURN)
            assert [c async for c in client.stream(request)] == TEXT
        [recorded] = server.requests
    assert recorded.body is not None
    assert recorded.body["model"] == "deepseek-flash"
    assert (recorded.body["thinking"], recorded.body["reasoning_effort"]) == (
        {"type": "enabled"},
        "high",
    )
    assert recorded.body["messages"][1]["reasoning_content"] == ""


@pytest.mark.parametrize(
    ("overrides", "wire"),
    [
        ({}, {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
        ({"reasoning_effort": "low"}, {"thinking": {"type": "enabled"}, "reasoning_effort": "low"}),
        ({"reasoning_effort": "max"}, {"thinking": {"type": "enabled"}, "reasoning_effort": "max"}),
        ({"reasoning_effort": "off"}, {"thinking": {"type": "disabled"}}),
        ({"thinking": "disabled"}, {"thinking": {"type": "disabled"}}),
        ({"thinking": "disabled", "reasoning_effort": "off"}, {"thinking": {"type": "disabled"}}),
    ],
)
async def test_thinking_settings_reach_the_wire_as_upstream_resolves_them(
    overrides: dict[str, Any], wire: dict[str, Any], make_settings: SettingsFactory
) -> None:
    # Upstream serialize.ts: "off" is never a wire effort; low/high/max enable thinking.
    with ScriptedModelServer([[TEXT]], strict=True) as server:
        async with DeepSeekClient(make_settings(server.base_url, **overrides)) as client:
            _ = [c async for c in client.stream(ModelRequest(session_id="s", messages=USER))]
        [recorded] = server.requests
    assert recorded.body is not None
    assert {
        k: recorded.body[k] for k in ("thinking", "reasoning_effort") if k in recorded.body
    } == (wire)


@pytest.mark.parametrize("model", ["deepseek-chat", "deepseek-reasoner", "no-such-model"])
async def test_a_retired_model_gets_the_real_400_and_consumes_nothing(
    model: str, make_settings: SettingsFactory
) -> None:
    chunks: list[Chunk] = []

    async def call(client: DeepSeekClient) -> None:
        async for chunk in client.stream(ModelRequest(session_id="s", messages=USER)):
            chunks.append(chunk)

    with ScriptedModelServer([[TEXT]], strict=True) as server:
        async with DeepSeekClient(make_settings(server.base_url, model=model)) as client:
            with pytest.raises(ModelError) as info:
                await call(client)
        statuses = [r.status for r in server.requests]
    error = info.value
    assert chunks == []
    assert (error.code, error.status, statuses) == ("BAD_REQUEST", 400, [400])
    assert error.message == (
        "DeepSeek API error (HTTP 400): The supported API model names are deepseek-flash or "
        f"deepseek-v4-pro, but you passed {model}."
    )


def _post(
    server: ScriptedModelServer, body: dict[str, Any], key: str | None = "k"
) -> httpx.Response:
    headers = {"X-DSH-Session-Id": "raw"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(server.base_url + "/chat/completions", json=body, headers=headers)


def _tool_turn_body(**extra: Any) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    return {
        "model": "deepseek-flash",
        "stream": True,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        **extra,
    }


def test_strict_mode_wants_reasoning_content_back_on_tool_call_turns() -> None:
    with ScriptedModelServer([[TEXT]], strict=True) as server:
        refused = _post(server, _tool_turn_body())
        assert refused.status_code == 400
        assert refused.json()["error"]["message"].startswith(
            "Missing `reasoning_content` field in the assistant message at message index 1."
        )
        assert set(refused.json()["error"]) == {"message", "type", "param", "code"}
        # Thinking disabled: no passback needed, and the script is still there to serve it.
        served = _post(server, _tool_turn_body(thinking={"type": "disabled"}))
        assert served.status_code == 200
        assert [r.status for r in server.requests] == [400, 200]
        server.assert_consumed()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"model": "deepseek-flash", "messages": [], "thinking": {"type": "on"}}, "thinking.type"),
        (
            {"model": "deepseek-flash", "messages": [{"role": "user"}], "reasoning_effort": "off"},
            "reasoning_effort must be one of low, high, max",
        ),
        ({"model": "deepseek-flash", "messages": []}, "messages must be a non-empty array"),
        ({"messages": []}, "missing field `model`"),
    ],
)
def test_strict_mode_refuses_what_the_api_refuses(body: dict[str, Any], says: str) -> None:
    with ScriptedModelServer([[TEXT]], strict=True) as server:
        refused = _post(server, body)
    assert refused.status_code == 400
    assert says in refused.json()["error"]["message"]


def test_strict_mode_wants_a_bearer_key_and_serves_models() -> None:
    with ScriptedModelServer([[TEXT]], strict=True) as server:
        assert _post(server, _tool_turn_body(), key=None).status_code == 401
        models = httpx.get(server.base_url + "/models")
        assert models.status_code == 401
        assert models.json()["error"]["type"] == "authentication_error"
        listed = httpx.get(server.base_url + "/models", headers={"Authorization": "Bearer k"})
        assert [m["id"] for m in listed.json()["data"]] == ["deepseek-flash", "deepseek-v4-pro"]

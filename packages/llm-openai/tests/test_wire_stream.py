"""ChatClient against the scripted server: chunk shapes, request body, incremental SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

from dsh_core import Chunk, ModelClient, ModelError, ModelRequest
from dsh_llm_openai import ChatClient, ChatSettings
from dsh_llm_openai.testing import FinishKind, text_response
from dsh_scripted_server import Pause, ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., ChatSettings]


async def collect(
    client: ChatClient[ChatSettings], session_id: str = "s-1", **kw: Any
) -> list[Chunk]:
    request = ModelRequest(
        session_id=session_id,
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        **kw,
    )
    return [c async for c in client.stream(request)]


async def test_client_satisfies_the_model_client_protocol(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    client: ModelClient = ChatClient(make_settings(server.base_url))  # checked by pyright
    assert isinstance(client, ModelClient)
    await client.aclose()


async def test_text_only_stream(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    script = text_response(["Hel", "lo"])
    server.add_session([script])
    async with ChatClient(make_settings(server.base_url)) as client:
        chunks = await collect(client)
    assert chunks == script
    assert chunks[0] == {"type": "block-start", "index": 0, "blockType": "text"}


async def test_reasoning_then_text(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    script = text_response(["P", "ONG"], ["The user", " wants PONG."])
    server.add_session([script])
    async with ChatClient(make_settings(server.base_url)) as client:
        chunks = await collect(client)
    assert chunks == script
    types = [c["type"] for c in chunks]
    assert types[-4:] == ["block-end", "block-end", "usage", "finish"]


async def test_two_tool_calls_in_one_response(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    a, b = "call_00_aaa", "call_01_bbb"
    script: list[Chunk] = [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "run two"},
        {"type": "block-start", "index": 1, "blockType": "tool-call"},
        {"type": "tool-call-delta", "index": 1, "id": a, "name": "bash", "argumentsDelta": ""},
        {
            "type": "tool-call-delta",
            "index": 1,
            "id": a,
            "name": "bash",
            "argumentsDelta": '{"command": "ls"}',
        },
        {"type": "block-start", "index": 2, "blockType": "tool-call"},
        {"type": "tool-call-delta", "index": 2, "id": b, "name": "subagent", "argumentsDelta": ""},
        {
            "type": "tool-call-delta",
            "index": 2,
            "id": b,
            "name": "subagent",
            "argumentsDelta": '{"prompt": ',
        },
        {
            "type": "tool-call-delta",
            "index": 2,
            "id": b,
            "name": "subagent",
            "argumentsDelta": '"x"}',
        },
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "run two"}},
        {
            "type": "block-end",
            "index": 1,
            "block": {
                "type": "tool-call",
                "id": a,
                "name": "bash",
                "arguments": '{"command": "ls"}',
            },
        },
        {
            "type": "block-end",
            "index": 2,
            "block": {
                "type": "tool-call",
                "id": b,
                "name": "subagent",
                "arguments": '{"prompt": "x"}',
            },
        },
        {
            "type": "usage",
            "usage": {
                "inputTokens": 1,
                "outputTokens": 2,
                "cacheReadTokens": 0,
                "reasoningTokens": 0,
            },
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    server.add_session([script])
    async with ChatClient(make_settings(server.base_url)) as client:
        assert await collect(client) == script


@pytest.mark.parametrize("kind", ["stop", "tool-calls", "max-tokens"])
async def test_finish_kinds_map_back(
    kind: FinishKind, server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    script = text_response(["x"], finish=kind)
    server.add_session([script])
    async with ChatClient(make_settings(server.base_url)) as client:
        chunks = await collect(client)
    assert chunks[-1] == {"type": "finish", "reason": {"kind": kind}}
    assert chunks[-2] == script[-2]  # usage, field by field


async def _drain(stream: AsyncIterator[Chunk], into: list[Chunk]) -> None:
    async for chunk in stream:
        into.append(chunk)


async def test_error_finish_mid_stream_keeps_what_streamed_and_raises(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    # The encoder sends an "error" finish as insufficient_system_resource; past the first chunk
    # it cannot be retried: the blocks and usage stay, the call ends with the reason's code.
    script = text_response(["x"], finish="error")
    server.add_session([script])
    received: list[Chunk] = []
    async with ChatClient(make_settings(server.base_url)) as client:
        stream = client.stream(ModelRequest(session_id="s-1", messages=[]))
        with pytest.raises(ModelError) as info:
            await _drain(stream, received)
    assert info.value.code == "INSUFFICIENT_SYSTEM_RESOURCE"
    assert received == script[:-1]


async def test_chunks_arrive_before_the_server_sends_the_rest(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    pause = Pause()
    script = text_response(["first", " second", " third"])
    server.add_session([[*script[:2], pause, *script[2:]]])
    received: list[Chunk] = []
    async with ChatClient(make_settings(server.base_url)) as client:
        stream = client.stream(ModelRequest(session_id="inc", messages=[]))
        # A client that buffered the body would block here for ever; fail instead of hanging.
        with anyio.fail_after(10):
            while len(received) < 2:
                received.append(await anext(stream))
        # The rest is provably unsent: the server cannot pass the pause until released.
        assert not pause.released
        assert received == script[:2]
        # The server sets `reached` just after flushing, so the client may be ahead of it.
        assert pause.wait_reached(10)
        pause.release()
        received.extend([c async for c in stream])
    assert received == script


async def test_assistant_text_message_and_no_tools(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([text_response(["ok"])])
    request = ModelRequest(
        session_id="s",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "ONE"}]},
        ],
    )
    async with ChatClient(make_settings(server.base_url)) as client:
        _ = [c async for c in client.stream(request)]
    body = server.requests[0].body
    assert body is not None
    assert "tools" not in body
    assert "max_tokens" not in body
    assert body["messages"] == [
        {"role": "user", "content": "a\n\nb"},
        {"role": "assistant", "content": "ONE"},
    ]


async def test_sessions_are_routed_by_header(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    first, second, explicit = (
        text_response(["one"]),
        text_response(["two"]),
        text_response(["three"]),
    )
    server.add_session([first])
    server.add_session([second])
    server.set_session("pinned", [explicit])
    async with ChatClient(make_settings(server.base_url)) as client:
        assert await collect(client, "pinned") == explicit
        assert await collect(client, "b") == first
        assert await collect(client, "a") == second
    assert [r.session_id for r in server.requests] == ["pinned", "b", "a"]
    server.assert_consumed()


async def test_missing_key_is_an_auth_error(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    async with ChatClient(make_settings(server.base_url, api_key=None)) as client:
        with pytest.raises(ModelError) as info:
            await collect(client)
    assert info.value.code == "AUTH"
    assert "OPENAI_API_KEY" in info.value.message
    assert server.requests == []


async def test_unknown_session_and_exhausted_script_are_410s_no_client_retries(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([text_response(["only"])])
    settings = make_settings(server.base_url, max_retries=3)
    async with ChatClient(settings) as client:
        await collect(client, "bound")
        with pytest.raises(ModelError) as exhausted:
            await collect(client, "bound")
        with pytest.raises(ModelError) as unknown:
            await collect(client, "stranger")
    assert exhausted.value.code == "HTTP_410"
    assert exhausted.value.status == 410
    assert "session bound (script #1) made call 2 but its script has 1 entries" in str(
        exhausted.value
    )
    assert "session stranger made a model call but all 1 scripts are already bound" in str(
        unknown.value
    )
    statuses = [(r.session_id, r.call, r.status) for r in server.requests]
    assert statuses == [("bound", 1, 200), ("bound", 2, 410), ("stranger", 1, 410)]
    assert server.requests[2].error is not None
    assert server.unconsumed() == []


async def test_assert_consumed_names_unused_scripts(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([text_response(["a"]), text_response(["b"])])
    server.add_session([text_response(["c"])])
    async with ChatClient(make_settings(server.base_url)) as client:
        await collect(client, "x")
    with pytest.raises(AssertionError) as info:
        server.assert_consumed()
    assert "session x (script #1) made 1 of 2 recorded calls" in str(info.value)
    assert "script #2 (1 calls) was never bound to a live session" in str(info.value)


async def test_server_enforces_its_api_key(make_settings: SettingsFactory) -> None:
    with ScriptedModelServer([[text_response(["x"])]], api_key="other-key") as srv:
        async with ChatClient(make_settings(srv.base_url)) as client:
            with pytest.raises(ModelError) as info:
                await collect(client)
        assert info.value.code == "AUTH"
        assert len(srv.requests) == 1

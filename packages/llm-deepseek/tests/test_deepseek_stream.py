"""DeepSeek's request body on the wire: its thinking fields and ``reasoning_content`` pass-back
(the wire's chunk shapes and streaming are ``dsh-llm-openai``'s tests)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsh_core import ModelRequest
from dsh_llm_deepseek import SESSION_HEADER, DeepSeekClient, DeepSeekSettings
from dsh_llm_deepseek.testing import ScriptedModelServer
from dsh_llm_openai.testing import text_response

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., DeepSeekSettings]


async def test_session_header_and_request_body(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([text_response(["ok"])])
    request = ModelRequest(
        session_id="sess-42",
        system="be brief",
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "run ls"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": "use bash"},
                    {
                        "type": "tool-call",
                        "id": "c1",
                        "name": "bash",
                        "arguments": '{"command":"ls"}',
                    },
                ],
            },
            {
                "role": "tool",
                "callId": "c1",
                "content": [{"type": "text", "text": "a.txt"}],
                "isError": False,
            },
        ],
        tools=[
            {
                "name": "bash",
                "description": "run a command",
                "parameters": {"type": "object", "properties": {}},
            }
        ],
    )
    async with DeepSeekClient(
        make_settings(server.base_url, model="deepseek-test", max_tokens=99)
    ) as client:
        _ = [c async for c in client.stream(request)]
    [recorded] = server.requests
    assert recorded.session_id == "sess-42"
    assert recorded.authorized
    assert recorded.path == "/chat/completions"
    assert recorded.body == {
        "model": "deepseek-test",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "run ls"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "use bash",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command":"ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "thinking": {"type": "enabled"},
        "reasoning_effort": "high",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "bash",
                    "description": "run a command",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ],
        "max_tokens": 99,
    }
    assert SESSION_HEADER == "X-DSH-Session-Id"

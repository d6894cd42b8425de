"""Upstream's ``llm-deepseek/tests/adapter.spec.ts`` (June 2026): the client against a local
server, as conformance cases for :class:`DeepSeekClient` on the real
:class:`ScriptedModelServer` (127.0.0.1), replaying upstream's SSE events byte for byte, and for
:class:`DeepSeekSettings` (key and base URL from config or ``DEEPSEEK_*``). Ledger:
COMPATIBILITY.md § "Upstream unit tests".
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import SecretStr

from dsh_core import Chunk, ModelError, ModelRequest
from dsh_llm_deepseek import DeepSeekClient, DeepSeekSettings
from dsh_llm_deepseek.testing import Fault, ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., DeepSeekSettings]

_TEXT_EVENTS = [
    '{"choices":[{"delta":{"role":"assistant","content":null,"reasoning_content":""}}]}',
    '{"choices":[{"delta":{"content":"hello"}}]}',
    '{"choices":[{"delta":{"content":""},"finish_reason":"stop"}],'
    '"usage":{"prompt_tokens":3,"completion_tokens":1}}',
    "[DONE]",
]
_HI = ModelRequest("s-1", [{"role": "user", "content": [{"type": "text", "text": "hi"}]}])


def _sse(events: list[str]) -> Fault:
    return Fault.raw([f"data: {event}\n\n" for event in events])


async def _collect(client: DeepSeekClient, request: ModelRequest = _HI) -> list[Chunk]:
    return [chunk async for chunk in client.stream(request)]


async def test_streams_a_text_generation_end_to_end(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([_sse(_TEXT_EVENTS)])
    async with DeepSeekClient(make_settings(server.base_url, model="deepseek-chat")) as client:
        chunks = await _collect(client)
    assert [c["type"] for c in chunks] == [
        "block-start",
        "text-delta",
        "block-end",
        "usage",
        "finish",
    ]
    assert [c["block"] for c in chunks if c["type"] == "block-end"] == [
        {"type": "text", "text": "hello"}
    ]
    [usage] = [c["usage"] for c in chunks if c["type"] == "usage"]
    assert (usage["inputTokens"], usage["outputTokens"]) == (3, 1)
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}
    body = server.requests[0].body
    assert body is not None
    assert (body["model"], body["stream"], body["stream_options"]) == (
        "deepseek-chat",
        True,
        {"include_usage": True},
    )


async def test_forwards_thinking_config_onto_the_wire(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([_sse(_TEXT_EVENTS)])
    settings = make_settings(server.base_url, thinking="enabled", reasoning_effort="high")
    async with DeepSeekClient(settings) as client:
        await _collect(client)
    body = server.requests[0].body
    assert body is not None
    assert (body["thinking"], body["reasoning_effort"]) == ({"type": "enabled"}, "high")


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, "AUTH"),
        (403, "AUTH"),
        (429, "RATE_LIMIT"),
        (400, "BAD_REQUEST"),  # upstream June: INVALID_REQUEST; ours names it as today's does
        (500, "SERVER"),
        (503, "SERVER"),
    ],
)
async def test_maps_http_status_to_an_error_code_with_the_body_message(
    status: int, code: str, server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.status(status, message=f"failed with {status}")] * 3)
    async with DeepSeekClient(make_settings(server.base_url, max_retries=2)) as client:
        with pytest.raises(ModelError, match=f"failed with {status}") as caught:
            await _collect(client)
    assert (caught.value.code, caught.value.status) == (code, status)


@pytest.mark.parametrize(
    ("case", "body"),
    [
        ("a JSON error body without a message", '{"error":{"type":"t"}}'),
        ("a non-JSON error body", "upstream exploded"),
    ],
)
async def test_the_status_line_is_kept_when_the_body_has_no_message(
    case: str, body: str, server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.status(418, body=body)])
    async with DeepSeekClient(make_settings(server.base_url)) as client:
        with pytest.raises(ModelError) as caught:
            await _collect(client)
    assert caught.value.code == "HTTP_418", case
    assert "HTTP 418" in caught.value.message


async def test_a_drop_mid_stream_is_an_error_not_a_short_answer(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session(
        [Fault.raw([f"data: {_TEXT_EVENTS[0]}\n\n", f"data: {_TEXT_EVENTS[1]}\n\n"])]
    )
    async with DeepSeekClient(make_settings(server.base_url, max_retries=0)) as client:
        with pytest.raises(ModelError):
            await _collect(client)


# describe('plugin registration and config'): the settings the client is built from
@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _fake_key(tag: str) -> str:
    return "-".join(["test", tag, "key"])


def test_falls_back_to_the_deepseek_env_vars(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DEEPSEEK_API_KEY", _fake_key("env"))
    clean_env.setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")
    settings = DeepSeekSettings()
    assert settings.api_key is not None
    assert (settings.api_key.get_secret_value(), settings.base_url) == (
        _fake_key("env"),
        "http://127.0.0.1:9",
    )


def test_explicit_config_wins_over_env(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DEEPSEEK_API_KEY", _fake_key("env"))
    clean_env.setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")
    settings = DeepSeekSettings(api_key=SecretStr(_fake_key("cfg")), base_url="http://[::1]:8")
    assert settings.api_key is not None
    assert (settings.api_key.get_secret_value(), settings.base_url) == (
        _fake_key("cfg"),
        "http://[::1]:8",
    )


def test_defaults_to_the_public_base_url(clean_env: pytest.MonkeyPatch) -> None:
    assert DeepSeekSettings().base_url == "https://api.deepseek.com"


async def test_a_clear_error_when_no_api_key_is_available(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelError, match=r"API key is not set \(DEEPSEEK_API_KEY\)"):
        async with DeepSeekClient(DeepSeekSettings()) as client:
            await _collect(client)

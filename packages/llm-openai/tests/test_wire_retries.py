"""Retries before the first chunk, none after it; every failure is a typed ModelError."""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dsh_core import Chunk, ModelError, ModelRequest
from dsh_llm_openai import ChatClient, ChatSettings
from dsh_scripted_server import Fault, Pause, ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., ChatSettings]

SCRIPT: list[Chunk] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "fine"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "fine"}},
    {
        "type": "usage",
        "usage": {"inputTokens": 5, "outputTokens": 1, "cacheReadTokens": 0, "reasoningTokens": 0},
    },
    {"type": "finish", "reason": {"kind": "stop"}},
]


async def collect(client: ChatClient[ChatSettings], session_id: str = "s-1") -> list[Chunk]:
    return [c async for c in client.stream(ModelRequest(session_id=session_id, messages=[]))]


async def drain(stream: AsyncIterator[Chunk], into: list[Chunk]) -> None:
    async for chunk in stream:
        into.append(chunk)


async def test_429_waits_for_retry_after_then_succeeds(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.status(429, retry_after=0.4), SCRIPT])
    # A large back-off would hide whether Retry-After was honoured: keep it tiny.
    async with ChatClient(make_settings(server.base_url, retry_base_wait=0.0)) as client:
        assert await collect(client) == SCRIPT
    first, second = server.requests
    assert (first.status, second.status) == (429, 200)
    assert second.received_at - first.received_at >= 0.4


async def test_retry_after_is_capped_by_settings(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.status(429, retry_after=3600), SCRIPT])
    settings = make_settings(server.base_url, max_retry_after=0.05)
    async with ChatClient(settings) as client:
        assert await collect(client) == SCRIPT
    assert [r.status for r in server.requests] == [429, 200]


async def test_429_until_retries_run_out_is_rate_limit(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.status(429, retry_after=0, message="slow down")] * 3)
    async with ChatClient(make_settings(server.base_url, max_retries=2)) as client:
        with pytest.raises(ModelError) as info:
            await collect(client)
    assert (info.value.code, info.value.status) == ("RATE_LIMIT", 429)
    assert info.value.message == "Model API error (HTTP 429): slow down"
    assert len(server.requests) == 3


async def test_500_is_retried_then_succeeds(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.status(500), Fault.status(503), SCRIPT])
    async with ChatClient(make_settings(server.base_url)) as client:
        assert await collect(client) == SCRIPT
    assert [r.status for r in server.requests] == [500, 503, 200]


async def test_503_retry_after_is_honoured(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.status(503, retry_after=0.3), SCRIPT])
    async with ChatClient(make_settings(server.base_url, retry_base_wait=0.0)) as client:
        assert await collect(client) == SCRIPT
    first, second = server.requests
    assert second.received_at - first.received_at >= 0.3


async def test_500_until_retries_run_out_is_server(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.status(500, message="boom")] * 4)
    async with ChatClient(make_settings(server.base_url, max_retries=3)) as client:
        with pytest.raises(ModelError) as info:
            await collect(client)
    assert (info.value.code, info.value.status) == ("SERVER", 500)
    assert str(info.value) == "Model API error (HTTP 500): boom"
    assert len(server.requests) == 4
    server.assert_consumed()


@pytest.mark.parametrize(
    ("status", "code"),
    [(401, "AUTH"), (403, "AUTH"), (400, "BAD_REQUEST"), (404, "HTTP_404"), (422, "HTTP_422")],
)
async def test_other_4xx_fail_at_once(
    status: int, code: str, server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.status(status, message="Authentication Fails"), SCRIPT])
    async with ChatClient(make_settings(server.base_url)) as client:
        with pytest.raises(ModelError) as info:
            await collect(client)
    assert (info.value.code, info.value.status) == (code, status)
    assert info.value.message == f"Model API error (HTTP {status}): Authentication Fails"
    assert len(server.requests) == 1


async def test_drop_mid_stream_is_not_retried(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.drop_after(2), SCRIPT])
    received: list[Chunk] = []
    async with ChatClient(make_settings(server.base_url)) as client:
        with pytest.raises(ModelError) as info:
            await drain(client.stream(ModelRequest(session_id="d", messages=[])), received)
    assert info.value.code == "NETWORK"
    assert "mid-stream" in info.value.message
    assert [c["type"] for c in received] == ["block-start", "text-delta", "text-delta"]
    assert len(server.requests) == 1


async def test_drop_before_any_chunk_is_retried(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.drop_after(0), SCRIPT])
    async with ChatClient(make_settings(server.base_url)) as client:
        assert await collect(client) == SCRIPT
    assert len(server.requests) == 2


async def test_slow_first_byte_times_out_and_is_retried(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.slow_first_byte(30.0), SCRIPT])
    settings = make_settings(server.base_url, stream_idle_timeout=1.0)
    async with ChatClient(settings) as client:
        assert await collect(client) == SCRIPT
    assert len(server.requests) == 2


async def test_slow_first_byte_within_timeout_is_served(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.slow_first_byte(0.1, SCRIPT)])
    async with ChatClient(make_settings(server.base_url, stream_idle_timeout=5)) as client:
        assert await collect(client) == SCRIPT
    assert len(server.requests) == 1


async def test_slow_first_byte_every_time_is_timeout(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    server.add_session([Fault.slow_first_byte(5.0)] * 2)
    settings = make_settings(server.base_url, stream_idle_timeout=0.1, max_retries=1)
    async with ChatClient(settings) as client:
        with pytest.raises(ModelError) as info:
            await collect(client)
    assert info.value.code == "TIMEOUT"
    assert "0.1s" in info.value.message
    assert len(server.requests) == 2


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_connection_refused_is_network_after_retries(make_settings: SettingsFactory) -> None:
    settings = make_settings(f"http://127.0.0.1:{_closed_port()}", max_retries=1)
    async with ChatClient(settings) as client:
        with pytest.raises(ModelError) as info:
            await collect(client)
    assert info.value.code == "NETWORK"
    assert info.value.status is None


# --- a raw server for bodies the scripted server would never send -----------------------------


class _RawHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    body = b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def raw_server() -> Iterator[Callable[[bytes], str]]:
    servers: list[ThreadingHTTPServer] = []

    def start(body: bytes) -> str:
        handler = type("Handler", (_RawHandler,), {"body": body})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


_DELTA = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"data: {not json\n\n", "event is not JSON"),
        (b"data: [1, 2]\n\n", "event is not a JSON object"),
        (_DELTA + b"data: [DONE]\n\n", "the stream ended before a finish_reason"),
        (_DELTA, "the stream ended before a finish_reason"),
        (b'data: {"choices": {"x": 1}}\n\n', "'choices' is not an array"),
        (b'data: {"choices":[{"delta":{"content":5}}]}\n\n', "'content' is not a string"),
        (
            b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{}}]}}]}\n\n',
            "a new tool call has no 'id'",
        ),
        (
            _DELTA + b'data: {"choices":[],"usage":{"completion_tokens":"7"}}\n\n',
            "usage field 'completion_tokens' is not an integer",
        ),
    ],
)
async def test_malformed_streams_are_protocol_errors(
    body: bytes, reason: str, raw_server: Callable[[bytes], str], make_settings: SettingsFactory
) -> None:
    async with ChatClient(make_settings(raw_server(body))) as client:
        with pytest.raises(ModelError) as info:
            await collect(client)
    assert info.value.code == "PROTOCOL"
    assert info.value.message.startswith(f"Model API error (malformed stream): {reason}")


async def test_error_event_in_stream(
    raw_server: Callable[[bytes], str], make_settings: SettingsFactory
) -> None:
    body = _DELTA + b'data: {"error": {"message": "overloaded"}}\n\n'
    async with ChatClient(make_settings(raw_server(body))) as client:
        with pytest.raises(ModelError) as info:
            await collect(client)
    assert (info.value.code, info.value.message) == (
        "SERVER",
        "Model API error (in stream): overloaded",
    )


async def test_openai_style_usage_and_content_filter(
    raw_server: Callable[[bytes], str], make_settings: SettingsFactory
) -> None:
    body = (
        b": keep-alive\n\n"
        + _DELTA
        + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}\n\n'
        + b'data: {"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":9,'
        b'"prompt_tokens_details":{"cached_tokens":60}}}\n\n' + b"data: [DONE]"
    )  # no blank line after the last event
    chunks: list[Chunk] = []
    async with ChatClient(make_settings(raw_server(body))) as client:
        with pytest.raises(ModelError) as info:
            await drain(client.stream(ModelRequest(session_id="s-1", messages=[])), chunks)
    # The content filter ends the turn with a clear error, after what streamed and its usage.
    assert info.value.code == "CONTENT_FILTER"
    assert "content filter" in info.value.message
    assert chunks[-1] == {
        "type": "usage",
        "usage": {
            "inputTokens": 40,
            "outputTokens": 9,
            "cacheReadTokens": 60,
            "reasoningTokens": 0,
        },
    }


async def test_read_timeout_after_the_first_chunk_is_not_retried(
    server: ScriptedModelServer, make_settings: SettingsFactory
) -> None:
    stall = Pause()  # never released: the server goes quiet after the first delta
    server.add_session([[*SCRIPT[:2], stall, *SCRIPT[2:]], SCRIPT])
    received: list[Chunk] = []
    async with ChatClient(make_settings(server.base_url, stream_idle_timeout=0.5)) as client:
        with pytest.raises(ModelError) as info:
            await drain(client.stream(ModelRequest(session_id="t", messages=[])), received)
    assert info.value.code == "TIMEOUT"
    assert received == SCRIPT[:2]
    assert len(server.requests) == 1

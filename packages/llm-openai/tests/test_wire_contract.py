"""The client against the strict contract server: every failure mode of a live stream.

The wire's behaviour on the generic profile (its label and ``OPENAI_*`` variables in the
messages); a profile's own contract (its request fields, its models, the rules its API
enforces) is tested in its package.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from dsh_core import Chunk, Message, ModelError, ModelRequest
from dsh_llm_openai import ChatClient, ChatSettings
from dsh_llm_openai.testing import text_response
from dsh_scripted_server import Fault, Response, ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., ChatSettings]

TEXT: list[Chunk] = text_response(["fine"])
USER: list[Message] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def _event(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return f"data: {json.dumps({'choices': [choice]})}\n\n"


async def _drain(stream: AsyncIterator[Chunk], into: list[Chunk]) -> None:
    async for chunk in stream:
        into.append(chunk)


async def _run(
    script: list[Response], make_settings: SettingsFactory, **overrides: Any
) -> tuple[list[Chunk], ModelError | None, list[int]]:
    """One call against a strict server: (chunks, the error, the statuses it answered)."""
    chunks: list[Chunk] = []
    error: ModelError | None = None
    with ScriptedModelServer([script], strict=True) as server:
        settings = make_settings(server.base_url, **overrides)
        async with ChatClient(settings) as client:
            try:
                await _drain(client.stream(ModelRequest(session_id="s", messages=USER)), chunks)
            except ModelError as exc:
                error = exc
        statuses = [r.status for r in server.requests]
    return chunks, error, statuses


# --- the failure modes of a live stream, through the client -------------------------------------


@pytest.mark.parametrize(
    ("script", "code", "statuses", "says"),
    [
        ([Fault.status(401)], "AUTH", [401], "Authentication Fails"),
        ([Fault.status(402)], "QUOTA", [402], "HTTP 402): Insufficient Balance (the account"),
        (
            [Fault.status(429, message="Your balance quota is used up")],
            "QUOTA",
            [429],
            "balance is exhausted",
        ),
        ([Fault.status(503)] * 6, "SERVER", [503] * 6, "Server Overloaded"),
        ([Fault.status(429)] * 6, "RATE_LIMIT", [429] * 6, "Rate Limit Reached"),
        ([Fault.empty()] * 6, "EMPTY_RESPONSE", [200] * 6, "no content"),
        (
            [[{"type": "finish", "reason": {"kind": "error"}}]] * 6,
            "INSUFFICIENT_SYSTEM_RESOURCE",
            [200] * 6,
            "lack of resources",
        ),
        ([Fault.drop_after(0)] * 6, "NETWORK", [200] * 6, "network"),
        (
            [Fault.status(502, body="<html><head><title>502 Bad Gateway</title></head></html>")]
            * 6,
            "SERVER",
            [502] * 6,
            "HTTP 502): an HTML page (502 Bad Gateway) instead of a JSON error",
        ),
        (
            [
                Fault.raw(
                    [_event({"content": "so"}), _event({}, "content_filter"), "data: [DONE]\n\n"]
                )
            ],
            "CONTENT_FILTER",
            [200],
            "content filter blocked the output",
        ),
    ],
    ids=[
        "401",
        "402",
        "429-quota",
        "503x6",
        "429x6",
        "emptyx6",
        "resourcex6",
        "dropx6",
        "html502x6",
        "content-filter",
    ],
)
async def test_failures_end_with_their_code_after_upstreams_retries(
    script: list[Response],
    code: str,
    statuses: list[int],
    says: str,
    make_settings: SettingsFactory,
) -> None:
    # Upstream's default policy: five retries of what is transient, none of what is not.
    _, error, answered = await _run(script, make_settings, max_retries=5, retry_base_wait=0.0)
    assert error is not None
    assert error.code == code
    assert says in error.message
    assert "\n" not in error.message
    assert answered == statuses


@pytest.mark.parametrize(
    "first",
    [
        Fault.status(429, retry_after=0.3),
        Fault.status(503, retry_after=0.3),
        Fault.empty(),
        Fault.drop_after(0),
        Fault.raw([_event({"content": ""}), _event({}, "insufficient_system_resource")]),
        Fault.raw([": keep-alive\n\n", 'data: {"error": {"message": "overloaded"}}\n\n']),
    ],
    ids=["429", "503", "empty", "drop", "resource", "error-event"],
)
async def test_a_transient_failure_before_the_first_chunk_is_retried(
    first: Response, make_settings: SettingsFactory
) -> None:
    chunks, error, answered = await _run([first, TEXT], make_settings, retry_base_wait=0.0)
    assert (chunks, error) == (TEXT, None)
    assert len(answered) == 2


async def test_retry_after_is_honoured(make_settings: SettingsFactory) -> None:
    with ScriptedModelServer([[Fault.status(429, retry_after=0.4), TEXT]], strict=True) as server:
        async with ChatClient(make_settings(server.base_url, retry_base_wait=0.0)) as client:
            _ = [c async for c in client.stream(ModelRequest(session_id="s", messages=USER))]
        first, second = server.requests
    assert second.received_at - first.received_at >= 0.4


async def test_a_server_wide_402_stops_every_call(make_settings: SettingsFactory) -> None:
    with ScriptedModelServer([[TEXT]], strict=True, chat_fault=Fault.status(402)) as server:
        async with ChatClient(make_settings(server.base_url)) as client:
            with pytest.raises(ModelError) as info:
                await _drain(client.stream(ModelRequest(session_id="s", messages=USER)), [])
        assert [r.status for r in server.requests] == [402]
    assert info.value.code == "QUOTA"


# --- the idle watchdog and the deadline ----------------------------------------------------------

_HELLO = [_event({"content": "hel"}), _event({"content": "lo"}, "stop"), "data: [DONE]\n\n"]


async def test_keep_alives_re_arm_the_idle_watchdog(make_settings: SettingsFactory) -> None:
    # Silence longer than the idle timeout in total, but never between two reads (upstream).
    parts: list[str | float] = [": keep-alive\n\n", 0.3] * 4 + _HELLO
    chunks, error, _ = await _run([Fault.raw(parts)], make_settings, stream_idle_timeout=0.6)
    assert error is None
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}


async def test_keep_alives_do_not_extend_the_deadline(make_settings: SettingsFactory) -> None:
    parts: list[str | float] = [": keep-alive\n\n", 0.3] * 6 + _HELLO
    _, error, answered = await _run(
        [Fault.raw(parts), TEXT], make_settings, stream_idle_timeout=0.6, stream_deadline=1.0
    )
    assert error is not None
    assert error.code == "TIMEOUT"
    assert "deadline of 1s (OPENAI_STREAM_DEADLINE)" in error.message
    assert answered == [200]  # a spent deadline is not retried


async def test_idle_stream_before_the_first_chunk_is_retried(
    make_settings: SettingsFactory,
) -> None:
    chunks, error, answered = await _run(
        [Fault.raw([5.0]), TEXT], make_settings, stream_idle_timeout=0.3
    )
    assert (chunks, error, len(answered)) == (TEXT, None, 2)


async def test_idle_stream_after_the_first_chunk_is_a_timeout(
    make_settings: SettingsFactory,
) -> None:
    chunks, error, answered = await _run(
        [Fault.raw([_event({"content": "hel"}), 5.0]), TEXT], make_settings, stream_idle_timeout=0.3
    )
    assert error is not None
    assert error.code == "TIMEOUT"
    assert "no data for 0.3s (stream idle timeout" in error.message
    assert [c["type"] for c in chunks] == ["block-start", "text-delta"]
    assert answered == [200]


async def test_a_non_json_error_body_is_one_bounded_line(make_settings: SettingsFactory) -> None:
    body = "upstream connect error or disconnect/reset before headers.\n" * 500
    _, error, _ = await _run([Fault.status(418, body=body)], make_settings)
    assert error is not None
    assert error.code == "HTTP_418"
    assert "\n" not in error.message
    assert len(error.message) < 400
    assert error.message.startswith(
        "Model API error (HTTP 418): upstream connect error or disconnect/reset before headers."
    )


@pytest.mark.parametrize("send", [False, True])
async def test_the_session_header_is_sent_only_when_asked(
    send: bool, make_settings: SettingsFactory
) -> None:
    seen: list[httpx.Headers] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return httpx.Response(401, json={"error": {"message": "no"}})

    settings = make_settings("http://models.test", send_session_id=send)
    async with ChatClient(settings, transport=httpx.MockTransport(answer)) as client:
        with pytest.raises(ModelError):
            await _drain(client.stream(ModelRequest(session_id="sid-7", messages=USER)), [])
    [headers] = seen
    assert headers.get("X-DSH-Session-Id") == ("sid-7" if send else None)
    assert headers["Accept"] == "text/event-stream"

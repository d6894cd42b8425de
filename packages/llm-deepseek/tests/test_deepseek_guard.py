"""The switch against accidental live calls: on in this suite, loopback still served."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

import dsh_llm_deepseek
from dsh_core import ALLOW_MODEL_REQUESTS_ENV, Chunk, ModelError, ModelRequest
from dsh_llm_deepseek import (
    DeepSeekClient,
    DeepSeekSettings,
    ModelRequestsDisabledError,
    model_requests_allowed,
    preflight,
)
from dsh_llm_deepseek.testing import ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., DeepSeekSettings]
# TEST-NET-1 (RFC 5737): never routed, so a connection attempt would hang or fail slowly.
_REMOTE = "http://192.0.2.10:8443"
_TEXT: list[Chunk] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "ok"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "ok"}},
    {"type": "finish", "reason": {"kind": "stop"}},
]


class _CountingTransport(httpx.AsyncHTTPTransport):
    """httpx's network transport, counting the requests that reach it."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return await super().handle_async_request(request)


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address a socket of this process tries to connect to during the test."""
    seen: list[Any] = []
    original = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        seen.append(address)
        original(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


async def _drain(client: DeepSeekClient) -> list[Chunk]:
    return [c async for c in client.stream(ModelRequest(session_id="s", messages=[]))]


def test_the_suite_runs_with_live_calls_off() -> None:
    # pyproject's addopts load dsh_core.testing.live_guard, which sets the variable to 0
    assert ALLOW_MODEL_REQUESTS_ENV == "DSH_ALLOW_MODEL_REQUESTS"
    assert not model_requests_allowed()


async def test_a_remote_host_is_refused_before_any_connection(
    make_settings: SettingsFactory, connects: list[Any]
) -> None:
    transport = _CountingTransport()
    client = DeepSeekClient(make_settings(_REMOTE), transport=transport)
    async with client:
        with pytest.raises(ModelRequestsDisabledError) as refused:
            await _drain(client)
    assert isinstance(refused.value, ModelError)
    assert refused.value.code == "MODEL_REQUESTS_DISABLED"
    message = str(refused.value)
    assert "dsh_llm_deepseek.ALLOW_MODEL_REQUESTS" in message
    assert "DSH_ALLOW_MODEL_REQUESTS=0" in message
    assert f"{_REMOTE}/chat/completions" in message
    assert (transport.requests, connects) == (0, [])


async def test_the_default_network_transport_is_guarded_too(
    make_settings: SettingsFactory, connects: list[Any]
) -> None:
    async with DeepSeekClient(make_settings("https://api.deepseek.com")) as client:
        with pytest.raises(ModelRequestsDisabledError):
            await _drain(client)
    assert connects == []


async def test_preflight_is_refused_too(
    make_settings: SettingsFactory, connects: list[Any]
) -> None:
    with pytest.raises(ModelRequestsDisabledError, match=r"192\.0\.2\.10:8443/models"):
        await preflight(make_settings(_REMOTE))
    assert connects == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_loopback_is_served_with_live_calls_off(
    make_settings: SettingsFactory, connects: list[Any], host: str
) -> None:
    assert not model_requests_allowed()
    with ScriptedModelServer([[_TEXT]]) as server:
        url = server.base_url.replace("127.0.0.1", host)
        async with DeepSeekClient(make_settings(url)) as client:
            assert await _drain(client) == _TEXT
    assert connects  # a real socket, on loopback
    server.assert_consumed()


async def test_an_in_memory_transport_opens_no_socket_and_is_not_refused(
    make_settings: SettingsFactory,
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "no"}})

    transport = httpx.MockTransport(answer)
    async with DeepSeekClient(make_settings(_REMOTE), transport=transport) as client:
        with pytest.raises(ModelError) as failed:
            await _drain(client)
    assert failed.value.code == "AUTH"  # the request was made, in memory


@pytest.mark.parametrize(
    ("flag", "env", "allowed"),
    [
        (True, "1", True),
        (True, None, True),
        (True, "0", False),
        (True, " OFF ", False),
        (True, "false", False),
        (False, "1", False),
        (False, None, False),
    ],
)
def test_either_the_flag_or_the_environment_turns_live_calls_off(
    monkeypatch: pytest.MonkeyPatch, flag: bool, env: str | None, allowed: bool
) -> None:
    monkeypatch.setattr(dsh_llm_deepseek, "ALLOW_MODEL_REQUESTS", flag)
    if env is None:
        monkeypatch.delenv(ALLOW_MODEL_REQUESTS_ENV)
    else:
        monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, env)
    assert model_requests_allowed() is allowed


async def test_the_module_flag_alone_refuses_a_remote_host(
    monkeypatch: pytest.MonkeyPatch, connects: list[Any]
) -> None:
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "1")
    monkeypatch.setattr(dsh_llm_deepseek, "ALLOW_MODEL_REQUESTS", False)
    settings = DeepSeekSettings(api_key=SecretStr("sk-test"), base_url=_REMOTE, max_retries=0)
    async with DeepSeekClient(settings) as client:
        with pytest.raises(ModelRequestsDisabledError):
            await _drain(client)
    assert connects == []

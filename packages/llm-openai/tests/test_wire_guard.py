"""The wire's side of the switch against accidental live calls: on in this suite, loopback still
served, a mock transport never refused, ``preflight`` guarded like the client.

The rule every client shares (a remote call refused with ``MODEL_REQUESTS_DISABLED`` before any
connection, by core's switch and the environment alike) is ``ModelClientConformance``'s, run by
each profile's hook-up; a profile's own ``ALLOW_MODEL_REQUESTS`` is tested in its package.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import dsh_llm_openai
from dsh_core import ALLOW_MODEL_REQUESTS_ENV, Chunk, ModelError, ModelRequest
from dsh_core.testing import connect_attempts
from dsh_llm_openai import (
    ChatClient,
    ChatSettings,
    ModelRequestsDisabledError,
    model_requests_allowed,
    preflight,
)
from dsh_llm_openai.testing import text_response
from dsh_scripted_server import ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., ChatSettings]
# TEST-NET-1 (RFC 5737): never routed, so a connection attempt would hang or fail slowly.
_REMOTE = "http://192.0.2.10:8443"


class _CountingTransport(httpx.AsyncHTTPTransport):
    """httpx's network transport, counting the requests that reach it."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return await super().handle_async_request(request)


@pytest.fixture
def connects() -> Iterator[list[Any]]:
    """Every address a socket of this process tries to connect to during the test."""
    with connect_attempts() as seen:
        yield seen


async def _drain(client: ChatClient[Any]) -> list[Chunk]:
    return [c async for c in client.stream(ModelRequest(session_id="s", messages=[]))]


def test_the_suite_runs_with_live_calls_off() -> None:
    # pyproject's addopts load dsh_core.testing.live_guard, which sets the variable to 0
    assert ALLOW_MODEL_REQUESTS_ENV == "DSH_ALLOW_MODEL_REQUESTS"
    assert not model_requests_allowed()


async def test_a_refusal_names_the_switch_and_the_url_and_reaches_no_transport(
    make_settings: SettingsFactory, connects: list[Any]
) -> None:
    transport = _CountingTransport()
    async with ChatClient(make_settings(_REMOTE), transport=transport) as client:
        with pytest.raises(ModelRequestsDisabledError) as refused:
            await _drain(client)
    assert isinstance(refused.value, ModelError)
    assert refused.value.code == "MODEL_REQUESTS_DISABLED"
    message = str(refused.value)
    assert "DSH_ALLOW_MODEL_REQUESTS=0" in message
    assert f"{_REMOTE}/chat/completions" in message
    assert (transport.requests, connects) == (0, [])


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
    answer = text_response(["ok"])
    with ScriptedModelServer([[answer]]) as server:
        url = server.base_url.replace("127.0.0.1", host)
        async with ChatClient(make_settings(url)) as client:
            assert await _drain(client) == answer
    assert connects  # a real socket, on loopback
    server.assert_consumed()


async def test_an_in_memory_transport_opens_no_socket_and_is_not_refused(
    make_settings: SettingsFactory,
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "no"}})

    transport = httpx.MockTransport(answer)
    async with ChatClient(make_settings(_REMOTE), transport=transport) as client:
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
def test_either_the_wire_flag_or_the_environment_turns_live_calls_off(
    monkeypatch: pytest.MonkeyPatch, flag: bool, env: str | None, allowed: bool
) -> None:
    monkeypatch.setattr(dsh_llm_openai, "ALLOW_MODEL_REQUESTS", flag)
    if env is None:
        monkeypatch.delenv(ALLOW_MODEL_REQUESTS_ENV)
    else:
        monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, env)
    assert model_requests_allowed() is allowed


async def test_the_wire_flag_alone_refuses_a_remote_host(
    monkeypatch: pytest.MonkeyPatch, make_settings: SettingsFactory, connects: list[Any]
) -> None:
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "1")
    monkeypatch.setattr(dsh_llm_openai, "ALLOW_MODEL_REQUESTS", False)
    async with ChatClient(make_settings(_REMOTE, max_retries=0)) as client:
        with pytest.raises(ModelRequestsDisabledError, match=r"dsh_llm_openai\.ALLOW_MODEL"):
            await _drain(client)
    assert connects == []

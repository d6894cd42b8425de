"""``preflight``: one GET /models, and one line saying what to do when the run cannot start.

The wire's rules on the generic profile (its variables, ``OPENAI_*``, named by the settings); a
profile's own models, variables and billing page are tested in its package.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import httpx
import pytest
from pydantic import SecretStr

from dsh_llm_openai import ChatSettings, PreflightError, ServedModels, preflight
from dsh_scripted_server import Fault, ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., ChatSettings]
_MODEL = str(ChatSettings.model_fields["model"].default)  # what the generic server serves


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_the_configured_model_served_passes(make_settings: SettingsFactory) -> None:
    with ScriptedModelServer(models=[_MODEL, "other"]) as server:
        base_url = server.base_url
        served = await preflight(make_settings(base_url))
        [request] = server.requests
    assert served == ServedModels(base_url=base_url, model=_MODEL, names=(_MODEL, "other"))
    # One GET /models with the key, and no chat call.
    assert (request.path, request.status, request.authorized) == ("/models", 200, True)


@pytest.mark.parametrize(
    ("server_options", "model", "problem", "status", "says"),
    [
        ({"api_key": "another-key"}, _MODEL, "auth", 401, "rejected the API key (HTTP 401: "),
        (
            {"models_fault": Fault.status(402, message="Insufficient Balance")},
            _MODEL,
            "balance",
            402,
            "the Model account's balance is exhausted (HTTP 402: Insufficient Balance): top it up",
        ),
        (
            {},
            "retired-model",
            "model",
            200,
            f"does not serve model 'retired-model': set OPENAI_MODEL to one of: {_MODEL}",
        ),
        (
            {"models_fault": Fault.status(503, body="<html><title>503 busy</title></html>")},
            _MODEL,
            "http",
            503,
            "answered HTTP 503 (an HTML page (503 busy) instead of a JSON error)",
        ),
    ],
)
async def test_each_problem_is_one_line_saying_what_to_do(
    server_options: dict[str, object],
    model: str,
    problem: str,
    status: int,
    says: str,
    make_settings: SettingsFactory,
    test_key: str,
) -> None:
    # The contract server in strict mode answers as a live API does.
    with ScriptedModelServer(strict=True, **server_options) as server:  # type: ignore[arg-type]
        with pytest.raises(PreflightError) as info:
            await preflight(make_settings(server.base_url, model=model))
        # Never a chat call; only the 503 is retried (settings_factory: two retries).
        calls = 3 if status == 503 else 1
        assert [r.path for r in server.requests] == ["/models"] * calls
    error = info.value
    assert (error.problem, error.status) == (problem, status)
    assert says in str(error)
    assert "\n" not in str(error)
    assert test_key not in str(error)
    if problem == "model":
        assert error.served == (_MODEL,)


async def test_unreachable_endpoint(make_settings: SettingsFactory) -> None:
    base = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(PreflightError) as info:
        await preflight(make_settings(base))
    assert info.value.problem == "unreachable"
    assert str(info.value).startswith(f"cannot reach {base}/models (ConnectError")
    assert str(info.value).endswith("check OPENAI_BASE_URL and the network, then rerun")
    assert info.value.__context__ is None
    assert info.value.__cause__ is None


async def test_no_key(make_settings: SettingsFactory) -> None:
    with pytest.raises(PreflightError) as info:
        await preflight(make_settings("http://127.0.0.1:9", api_key=None))
    assert info.value.problem == "no-key"
    assert "no Model API key: set OPENAI_API_KEY" in str(info.value)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json at all", "did not answer a model list (not json at all)"),
        (b'{"data": [{"name": "x"}]}', "did not answer a model list"),
        (b'{"data": "x"}', "did not answer a model list"),
        (b"[1]", "did not answer a model list"),
        (b'{"data": [1]}', "did not answer a model list"),
    ],
)
async def test_an_answer_that_is_no_model_list(
    body: bytes, says: str, make_settings: SettingsFactory
) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    with pytest.raises(PreflightError) as info:
        await preflight(make_settings("http://models.test"), transport=transport)
    assert info.value.problem == "protocol"
    assert says in str(info.value)


async def test_a_key_echoed_by_the_endpoint_is_redacted(
    make_settings: SettingsFactory, test_key: str
) -> None:
    # The echo straddles the old 4,096-byte cut: it must go before anything is cut.
    body = b"x" * 4090 + test_key.encode() + b" is not valid"
    transport = httpx.MockTransport(lambda request: httpx.Response(403, content=body))
    settings = make_settings("http://models.test", api_key=SecretStr(test_key))
    with pytest.raises(PreflightError) as info:
        await preflight(settings, transport=transport)
    assert info.value.problem == "auth"
    assert test_key[:8] not in repr(info.value.args)


async def test_a_busy_endpoint_is_retried_honouring_retry_after(
    make_settings: SettingsFactory,
) -> None:
    answers = [
        httpx.Response(429, headers={"Retry-After": "0.3"}, json={"error": {"message": "busy"}}),
        httpx.Response(200, json={"object": "list", "data": [{"id": _MODEL}]}),
    ]
    sent: list[float] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(time.monotonic())
        return answers[len(sent) - 1]

    transport = httpx.MockTransport(answer)
    served = await preflight(make_settings("http://models.test"), transport=transport)
    assert served.names == (_MODEL,)
    assert sent[1] - sent[0] >= 0.3

"""DeepSeek's own switch against accidental live calls, ``dsh_llm_deepseek.ALLOW_MODEL_REQUESTS``.

The rules every client shares are ``ModelClientConformance``'s (``test_deepseek_conformance``);
the wire's transport and ``preflight`` are the wire's (``dsh-llm-openai``'s
``test_wire_guard``). What is DeepSeek's: its package's flag counts, and a refusal names it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import dsh_llm_deepseek
from dsh_core import ALLOW_MODEL_REQUESTS_ENV, ModelRequest
from dsh_core.testing import connect_attempts
from dsh_llm_deepseek import (
    DeepSeekClient,
    DeepSeekSettings,
    ModelRequestsDisabledError,
    model_requests_allowed,
)

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., DeepSeekSettings]
# TEST-NET-1 (RFC 5737): never routed, so a connection attempt would hang or fail slowly.
_REMOTE = "http://192.0.2.10:8443"


@pytest.fixture
def connects() -> Iterator[list[Any]]:
    """Every address a socket of this process tries to connect to during the test."""
    with connect_attempts() as seen:
        yield seen


async def _refused(settings: DeepSeekSettings) -> str:
    async with DeepSeekClient(settings) as client:
        with pytest.raises(ModelRequestsDisabledError) as refused:
            async for _ in client.stream(ModelRequest(session_id="s", messages=[])):
                pass
    return str(refused.value)


async def test_a_refusal_names_deepseeks_switch(
    make_settings: SettingsFactory, connects: list[Any]
) -> None:
    message = await _refused(make_settings("https://api.deepseek.com"))
    assert "dsh_llm_deepseek.ALLOW_MODEL_REQUESTS" in message
    assert "https://api.deepseek.com/chat/completions" in message
    assert connects == []


async def test_the_module_flag_alone_refuses_a_remote_host(
    monkeypatch: pytest.MonkeyPatch, make_settings: SettingsFactory, connects: list[Any]
) -> None:
    # How the flags and the environment combine is core's (test_live_guard) and the wire's
    # (test_wire_guard); here: DeepSeek's flag is one of them.
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "1")
    assert model_requests_allowed()
    monkeypatch.setattr(dsh_llm_deepseek, "ALLOW_MODEL_REQUESTS", False)
    assert not model_requests_allowed()
    message = await _refused(make_settings(_REMOTE, max_retries=0))
    assert "dsh_llm_deepseek.ALLOW_MODEL_REQUESTS" in message
    assert connects == []

"""Fixtures of the dsh-llm-proxy tests: loopback-only network, a keyed scripted upstream, and a
record-then-replay driver for clients nobody here wrote."""

from __future__ import annotations

import json
import secrets
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_core import Chunk, SessionHeader
from dsh_llm_proxy import ProxyServer
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_scripted_server import Response, ScriptedModelServer

KEY_ENV = "DSH_PROXY_TEST_UPSTREAM_KEY"


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Refuse every connection that leaves 127.0.0.1 / ::1, and fail the test if anything
    tried: an SDK phoning home from a background thread would swallow the refusal."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    attempts: list[str] = []

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            host = str(address[0])
            if host not in ("127.0.0.1", "::1", "localhost"):
                attempts.append(repr(address))
                raise ConnectionRefusedError(f"network is off in tests: {address!r}")

    def connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    # The SDKs' own switches, too: no tracing exporter, no telemetry.
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "dummy-client-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    yield attempts
    assert attempts == [], f"the test tried to leave the machine: {attempts}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh upstream key in the proxy's environment (never in a tracked file)."""
    key = "upstream-" + secrets.token_hex(12)
    monkeypatch.setenv(KEY_ENV, key)
    return key


def text(words: Sequence[str], *, usage: bool = True) -> list[Chunk]:
    """A text answer streamed one word per delta."""
    out: list[Chunk] = [{"type": "block-start", "index": 0, "blockType": "text"}]
    out.extend({"type": "text-delta", "index": 0, "text": w} for w in words)
    out.append({"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(words)}})
    if usage:
        out.append(
            {
                "type": "usage",
                "usage": {
                    "inputTokens": 11,
                    "outputTokens": len(words),
                    "cacheReadTokens": 3,
                    "reasoningTokens": 0,
                },
            }
        )
    out.append({"type": "finish", "reason": {"kind": "stop"}})
    return out


def tool_calls(*calls: tuple[str, str, dict[str, Any]]) -> list[Chunk]:
    """An answer asking for tools: ``(call id, tool name, arguments)`` each, in two deltas."""
    out: list[Chunk] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = json.dumps(arguments)
        half = len(raw) // 2
        out.append({"type": "block-start", "index": index, "blockType": "tool-call"})
        out.append(
            {
                "type": "tool-call-delta",
                "index": index,
                "id": call_id,
                "name": name,
                "argumentsDelta": raw[:half],
            }
        )
        out.append(
            {
                "type": "tool-call-delta",
                "index": index,
                "id": call_id,
                "name": name,
                "argumentsDelta": raw[half:],
            }
        )
    for index, (call_id, name, arguments) in enumerate(calls):
        out.append(
            {
                "type": "block-end",
                "index": index,
                "block": {
                    "type": "tool-call",
                    "id": call_id,
                    "name": name,
                    "arguments": json.dumps(arguments),
                },
            }
        )
    out.append({"type": "finish", "reason": {"kind": "tool-calls"}})
    return out


@pytest.fixture
def make_text() -> Callable[..., list[Chunk]]:
    """:func:`text`, for test modules (conftest is not importable under importlib mode)."""
    return text


@pytest.fixture
def make_tool_calls() -> Callable[..., list[Chunk]]:
    """:func:`tool_calls`, for test modules."""
    return tool_calls


@dataclass
class Recorded:
    """What a record-then-replay run left behind."""

    root: Path
    recorded: Any
    replayed: Any
    upstream_requests: int

    def headers(self) -> list[SessionHeader]:
        """The recorded sessions' headers, in creation order."""
        store = JsonlSessionStore(self.root)
        try:
            return store.list_sessions()
        finally:
            store.close()

    def events(self, session_id: str) -> list[Any]:
        """One recorded session's events."""
        store = JsonlSessionStore(self.root)
        try:
            return list(store.load(session_id).events)
        finally:
            store.close()


RoundTrip = Callable[[Sequence[Sequence[Response]], Callable[[str], Any]], Recorded]


@pytest.fixture
def roundtrip(tmp_path: Path, upstream_key: str) -> RoundTrip:
    """Record ``run(base_url)`` through the proxy against a scripted upstream, then replay it
    with the upstream stopped; both results and the recording root come back."""

    def run_both(scripts: Sequence[Sequence[Response]], run: Callable[[str], Any]) -> Recorded:
        root = tmp_path / "recording"
        with ScriptedModelServer(scripts, api_key=upstream_key) as upstream:
            with ProxyServer.record(root, upstream=upstream.base_url, api_key_env=KEY_ENV) as p:
                recorded = run(p.base_url)
            upstream.assert_consumed()
            requests = len(upstream.requests)
        with ProxyServer.replay(root) as proxy:
            replayed = run(proxy.base_url)
            report = proxy.report()
        assert report.problems == []
        return Recorded(root, recorded, replayed, requests)

    return run_both

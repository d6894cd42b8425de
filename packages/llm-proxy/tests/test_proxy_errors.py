"""Every error path of the proxy: bad requests, upstream failures, missing keys and roots,
session conflicts; and the SQLite store, explicit session ids and ``/models``."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from dsh_core import Chunk, DshError
from dsh_core.plugins import store_backend
from dsh_llm_openai import SESSION_HEADER
from dsh_llm_proxy import ProxyServer, main
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_scripted_server import Fault, ScriptedModelServer

KEY_ENV = "DSH_PROXY_TEST_UPSTREAM_KEY"
HELLO: list[Any] = [{"role": "user", "content": "hi"}]


def _client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="dummy", max_retries=0)


def _sessions(root: Path) -> list[str]:
    store = JsonlSessionStore(root)
    try:
        return [h.id for h in store.list_sessions()]
    finally:
        store.close()


def test_a_body_that_is_not_json_is_a_400(tmp_path: Path, upstream_key: str) -> None:
    with ProxyServer.record(tmp_path, upstream="http://127.0.0.1:9", api_key_env=KEY_ENV) as p:
        bad = httpx.post(
            p.base_url + "/chat/completions",
            content=b"{nope",
            headers={"content-type": "application/json"},
        )
        array = httpx.post(p.base_url + "/chat/completions", json=[1])
    assert bad.status_code == 400
    assert "not JSON" in bad.json()["error"]["message"]
    assert array.status_code == 400
    assert "not an object" in array.json()["error"]["message"]


def test_an_unreachable_upstream_is_a_502_and_nothing_is_recorded(
    tmp_path: Path, upstream_key: str
) -> None:
    with ScriptedModelServer() as gone:
        url = gone.base_url  # a port nothing listens on once it is closed
    with ProxyServer.record(tmp_path, upstream=url, api_key_env=KEY_ENV) as proxy:
        with _client(proxy.base_url) as client, pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="m", messages=HELLO)
        models = httpx.get(proxy.base_url + "/models")
    assert caught.value.status_code == 502
    assert "upstream unreachable" in caught.value.message
    assert models.status_code == 502
    assert _sessions(tmp_path) == []


def test_upstream_errors_pass_through_unrecorded_and_the_retry_is_recorded(
    tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> None:
    script = [
        Fault.status(503, retry_after=1, message=f"overloaded (key {upstream_key})"),
        Fault.drop_after(2),
        Fault.drop_after(1),
        make_text(["fine"]),
    ]
    with (
        ScriptedModelServer([script], api_key=upstream_key) as upstream,
        ProxyServer.record(tmp_path, upstream=upstream.base_url, api_key_env=KEY_ENV) as proxy,
        _client(proxy.base_url) as client,
    ):
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model="m", messages=HELLO)
        assert caught.value.status_code == 503
        assert caught.value.response.headers["retry-after"] == "1"
        assert upstream_key not in caught.value.message  # redacted
        assert "[redacted]" in caught.value.message
        with pytest.raises(openai.APIError, match="upstream stream failed"):
            list(client.chat.completions.create(model="m", messages=HELLO, stream=True))
        with pytest.raises(openai.InternalServerError, match="upstream stream failed"):
            client.chat.completions.create(model="m", messages=HELLO)
        reply = client.chat.completions.create(model="m", messages=HELLO)
        assert reply.choices[0].message.content == "fine"
    (session,) = _sessions(tmp_path)
    store = JsonlSessionStore(tmp_path)
    try:
        events = store.load(session).events
    finally:
        store.close()
    assert [e.type for e in events].count("user/message") == 1
    assert [e.type for e in events].count("step/start") == 1


def test_a_wrong_key_upstream_answers_401_to_the_client(
    tmp_path: Path, upstream_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        ScriptedModelServer([[]], api_key=upstream_key + "-other") as upstream,
        ProxyServer.record(tmp_path, upstream=upstream.base_url, api_key_env=KEY_ENV) as p,
        _client(p.base_url) as client,
        pytest.raises(openai.AuthenticationError),
    ):
        client.chat.completions.create(model="m", messages=HELLO)
    assert _sessions(tmp_path) == []


def test_record_refuses_to_start_without_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(DshError, match=KEY_ENV):
        ProxyServer.record(tmp_path, api_key_env=KEY_ENV)
    assert main(["record", "--root", str(tmp_path), "--api-key-env", KEY_ENV]) == 2
    assert KEY_ENV in capsys.readouterr().err


def test_replay_needs_an_existing_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(DshError, match="does not exist"):
        ProxyServer.replay(tmp_path / "missing")
    assert main(["replay", "--root", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_recording_proxy_has_no_consumption_report(tmp_path: Path, upstream_key: str) -> None:
    proxy = ProxyServer.record(tmp_path, upstream="http://127.0.0.1:9", api_key_env=KEY_ENV)
    try:
        assert proxy.problems() == []
        with pytest.raises(DshError, match="only a replaying proxy"):
            proxy.report()
    finally:
        proxy.close()


def test_explicit_session_ids_and_their_conflicts(
    tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> None:
    with (
        ScriptedModelServer(api_key=upstream_key) as upstream,
        ProxyServer.record(tmp_path, upstream=upstream.base_url, api_key_env=KEY_ENV) as proxy,
    ):
        upstream.set_session("mine", [make_text(["a"]), make_text(["b"])])
        url = proxy.base_url + "/chat/completions"
        headers = {SESSION_HEADER: "mine"}
        first = httpx.post(url, json={"model": "m", "messages": HELLO}, headers=headers)
        assert first.json()["choices"][0]["message"]["content"] == "a"
        assert first.headers[SESSION_HEADER] == "mine"
        other = [{"role": "user", "content": "something else"}]
        conflict = httpx.post(url, json={"model": "m", "messages": other}, headers=headers)
        assert conflict.status_code == 409
        assert "does not continue" in conflict.json()["error"]["message"]
        more = [*HELLO, {"role": "assistant", "content": "a"}, {"role": "user", "content": "+"}]
        second = httpx.post(url, json={"model": "m", "messages": more}, headers=headers)
        assert second.json()["choices"][0]["message"]["content"] == "b"
    assert _sessions(tmp_path) == ["mine"]


def test_sqlite_store_records_and_replays(
    tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> None:
    with (
        ScriptedModelServer([[make_text(["from ", "sqlite"])]], api_key=upstream_key) as upstream,
        ProxyServer.record(
            tmp_path, store="sqlite", upstream=upstream.base_url, api_key_env=KEY_ENV
        ) as proxy,
        _client(proxy.base_url) as client,
    ):
        stream = client.chat.completions.create(model="m", messages=HELLO, stream=True)
        recorded = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    # The SQLite backend's own layout, read through the registry, not a file name.
    assert len(store_backend("sqlite").list_sessions(tmp_path)) == 1
    with ProxyServer.replay(tmp_path) as proxy, _client(proxy.base_url) as client:
        stream = client.chat.completions.create(model="m", messages=HELLO, stream=True)
        replayed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        models = client.models.list()
        assert proxy.problems() == []
    assert recorded == replayed == "from sqlite"
    assert [m.id for m in models] == ["m"]


def test_the_network_guard_bites(loopback_only: list[str]) -> None:
    # 192.0.2.1 is TEST-NET-1: never routed. The guard must refuse before any packet leaves,
    # and remember the attempt so that teardown fails even if the caller swallowed the error.
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError, match="network is off"):
        sock.connect(("192.0.2.1", 443))
    assert loopback_only == ["('192.0.2.1', 443)"]
    loopback_only.clear()


def test_record_refuses_a_root_that_already_holds_sessions(
    tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> None:
    with (
        ScriptedModelServer([[make_text(["x"])]], api_key=upstream_key) as upstream,
        ProxyServer.record(tmp_path, upstream=upstream.base_url, api_key_env=KEY_ENV) as proxy,
        _client(proxy.base_url) as client,
    ):
        client.chat.completions.create(model="m", messages=HELLO)
    before = sorted(p.read_bytes() for p in tmp_path.iterdir())
    with pytest.raises(DshError, match="already holds 1 recorded sessions"):
        ProxyServer.record(tmp_path, api_key_env=KEY_ENV)
    assert sorted(p.read_bytes() for p in tmp_path.iterdir()) == before

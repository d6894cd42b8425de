"""One proxy serving many runs (``ProxyHub``): each run's route records into and replays from
its own root, at the same time as the others, and nothing reaches a route but its own URL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from dsh_core import Chunk, DshError
from dsh_llm_proxy import ProxyHub, ProxyRoute, ProxyServer, shared_hub
from dsh_llm_proxy._serving import ServingThread, loopback_socket
from dsh_scripted_server import ScriptedModelServer


def _ask(base_url: str, question: str, *, stream: bool = False) -> str:
    with openai.OpenAI(base_url=base_url, api_key="dummy-client-key", max_retries=0) as client:
        messages: list[Any] = [{"role": "user", "content": question}]
        if stream:
            chunks = client.chat.completions.create(model="m", messages=messages, stream=True)
            return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reply = client.chat.completions.create(model="m", messages=messages)
        return reply.choices[0].message.content or ""


def _record_one(hub: ProxyHub, root: Path, key: str, answer: list[Chunk]) -> ProxyRoute:
    """One call recorded through a route of ``hub`` into ``root``; the closed route."""
    with (
        ScriptedModelServer([[answer]], api_key=key) as upstream,
        hub.record(root, upstream=upstream.base_url, api_key=key) as recording,
    ):
        assert _ask(recording.base_url, "q") == "one"
    return recording


@pytest.fixture
def hub() -> Any:
    with_hub = ProxyHub().start()
    yield with_hub
    with_hub.close()


def test_runs_record_and_replay_side_by_side_on_one_hub(
    hub: ProxyHub, tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> None:
    roots = [tmp_path / "a", tmp_path / "b"]
    answers = {"a?": ["alpha"], "b?": ["be", "ta"]}
    # The upstream routes by question: the two runs' calls arrive in any order.
    by_question = {q: make_text(words) for q, words in answers.items()}

    def route(body: dict[str, Any] | None) -> tuple[Any, str | None]:
        question = (body or {})["messages"][-1]["content"]
        return by_question[question], None

    with ScriptedModelServer(api_key=upstream_key, router=route) as upstream:
        routes = [
            hub.record(root, upstream=upstream.base_url, api_key=upstream_key, store=store)
            for root, store in zip(roots, ("jsonl", "sqlite"), strict=True)
        ]
        assert len({r.base_url for r in routes}) == 2
        got: dict[str, str] = {}

        def ask(route: ProxyRoute, question: str) -> None:
            got[question] = _ask(route.base_url, question)

        threads = [
            threading.Thread(target=ask, args=(r, q)) for r, q in zip(routes, answers, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for r in routes:
            r.close()
        assert got == {"a?": "alpha", "b?": "beta"}
        assert all(r.authorized for r in upstream.requests)

    # Replayed from each root on the same hub, the upstream gone: each route answers its own.
    with hub.replay(roots[0]) as first, hub.replay(roots[1]) as second:
        assert _ask(second.base_url, "b?", stream=True) == "beta"
        assert _ask(first.base_url, "a?") == "alpha"
        assert first.report().ok
        assert second.report().ok
    # The same roots through a ProxyServer of their own: the hub wrote ordinary recordings.
    with ProxyServer.replay(roots[1]) as alone:
        assert _ask(alone.base_url, "b?") == "beta"


def test_a_replayed_route_reports_what_it_was_not_asked(
    hub: ProxyHub, tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> None:
    root = tmp_path / "r"
    recording = _record_one(hub, root, upstream_key, make_text(["one"]))
    with pytest.raises(DshError, match="only a replaying route"):
        recording.report()
    with hub.replay(root) as replaying:
        report = replaying.report()
    assert not report.ok
    assert report.problems  # the recorded call nobody made


def test_nothing_but_a_live_route_is_served(
    hub: ProxyHub, tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> None:
    recording = _record_one(hub, tmp_path / "r", upstream_key, make_text(["one"]))
    base = f"http://127.0.0.1:{hub.port}"
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    for path in (
        "/v1/chat/completions",  # no route at all
        "/run/" + "0" * 32 + "/v1/chat/completions",  # a token nobody was given
        recording.base_url.removeprefix(base) + "/chat/completions",  # a closed route
        "/run/",
    ):
        answer = httpx.post(base + path, json=body, trust_env=False)
        assert answer.status_code == 404, path
        assert "no run is served" in answer.json()["error"]["message"]
    # The loopback guard stands in front of the routes too.
    refused = httpx.post(base + "/v1/chat/completions", content=b"{}", trust_env=False)
    assert refused.status_code == 415


def test_recording_into_a_root_that_holds_sessions_is_refused(
    hub: ProxyHub, tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> None:
    root = tmp_path / "r"
    _record_one(hub, root, upstream_key, make_text(["one"]))
    with pytest.raises(DshError, match="already holds 1 recorded sessions"):
        hub.record(root, upstream="http://127.0.0.1:9/v1", api_key=upstream_key)
    with pytest.raises(DshError, match="does not exist"):
        hub.replay(tmp_path / "missing")


def test_a_server_that_cannot_start_says_so_and_a_stopped_one_runs_nothing() -> None:
    sock = loopback_socket()
    sock.close()  # nothing to serve on

    async def app(scope: Any, receive: Any, send: Any) -> None:
        del scope, receive, send

    serving = ServingThread(app, sock, "test server", lifespan=False)
    with pytest.raises(DshError, match="test server: the server did not start"):
        serving.start()

    async def nothing() -> None:
        return None

    with pytest.raises(DshError, match="test server: the server is not running"):
        serving.run(nothing, 1.0)


def test_stop_lets_an_answer_in_flight_finish(tmp_path: Path) -> None:
    """A stop while a request is being answered waits for that answer, then returns."""
    started, release = threading.Event(), threading.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        started.set()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while not release.is_set():
            await _sleep()
        await send({"type": "http.response.body", "body": b"done"})

    sock = loopback_socket()
    port = sock.getsockname()[1]
    serving = ServingThread(app, sock, "slow server", lifespan=False)
    serving.start()
    url = f"http://127.0.0.1:{port}/"
    result: list[bytes] = []
    client = threading.Thread(target=lambda: result.append(httpx.get(url, trust_env=False).content))
    client.start()
    assert started.wait(30)
    stopper = threading.Thread(target=serving.stop)
    stopper.start()
    release.set()
    stopper.join()
    client.join()
    assert result == [b"done"]
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, trust_env=False)


async def _sleep() -> None:
    import asyncio  # noqa: PLC0415 - only the slow app awaits

    await asyncio.sleep(0.005)


def test_one_hub_per_process() -> None:
    hub = shared_hub()
    assert shared_hub() is hub
    answer = httpx.get(f"http://127.0.0.1:{hub.port}/run/x/v1/models", trust_env=False)
    assert answer.status_code == 404

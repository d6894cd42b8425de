"""A route's budget over real HTTP (red team 4 F8): the hub runs inside the gate, so an agent
that opens many connections with big bodies must not grow it without bound, and a run that
behaves is not affected."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from dsh_core import Chunk
from dsh_llm_proxy import ProxyHub, ProxyRoute, _guard
from dsh_scripted_server import ScriptedModelServer

_MIB = 1024 * 1024


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """1 MiB per body, 3 MiB per route: the proxy runs in-process, the test stays cheap."""
    monkeypatch.setattr(_guard, "MAX_REQUEST_BYTES", _MIB)
    monkeypatch.setattr(_guard, "ROUTE_MAX_BYTES", 3 * _MIB)


@pytest.fixture
def hub() -> Iterator[ProxyHub]:
    started = ProxyHub().start()
    yield started
    started.close()


@pytest.fixture
def routes(
    hub: ProxyHub, tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> Iterator[tuple[ProxyRoute, ProxyRoute]]:
    """Two recording routes on one hub, each answering 'ok' from a scripted upstream."""
    with ScriptedModelServer(
        api_key=upstream_key, router=lambda _body: (make_text(["ok"]), None)
    ) as upstream:
        made = [
            hub.record(tmp_path / name, upstream=upstream.base_url, api_key=upstream_key)
            for name in ("flooded", "other")
        ]
        try:
            yield made[0], made[1]
        finally:
            for route in made:
                route.close()


def _held_post(hub: ProxyHub, path: str, declared: int, sent: int) -> socket.socket:
    """A POST declaring ``declared`` body bytes of which only ``sent`` are sent: it is held."""
    sock = socket.create_connection(("127.0.0.1", hub.port), timeout=30)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{hub.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    )
    sock.sendall(head.encode() + b"x" * sent)
    return sock


def _statuses(socks: list[socket.socket], count: int) -> list[int]:
    """The status of the first ``count`` answers among ``socks`` (each read whole)."""
    found: list[int] = []
    waiting = list(socks)
    deadline = time.monotonic() + 60  # a hang fails the test instead of the suite
    while len(found) < count and time.monotonic() < deadline:
        ready, _, _ = select.select(waiting, [], [], 1.0)
        for sock in ready:
            data = sock.recv(65536)
            found.append(int(data.split(b" ", 2)[1]) if data else 0)
            waiting.remove(sock)
    return found


def _whole_answer(sock: socket.socket) -> str:
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
        more = sock.recv(65536)
        if not more:
            break
        data += more
    return data.decode()


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def _ask(route: ProxyRoute) -> str:
    with openai.OpenAI(base_url=route.base_url, api_key="dummy", max_retries=0) as client:
        messages: list[Any] = [{"role": "user", "content": "q"}]
        reply = client.chat.completions.create(model="m", messages=messages)
        return reply.choices[0].message.content or ""


def _path(route: ProxyRoute) -> str:
    return route.base_url.split(str(route.base_url.split("/run/")[0]), 1)[1] + "/chat/completions"


@pytest.mark.usefixtures("small_budget")
def test_many_big_bodies_on_one_route_stay_within_its_budget(
    hub: ProxyHub, routes: tuple[ProxyRoute, ProxyRoute]
) -> None:
    flooded, other = routes
    budget = flooded.budget
    declared = _MIB  # three of them fill the route's 3 MiB exactly
    socks = [_held_post(hub, _path(flooded), declared, 65536) for _ in range(12)]
    try:
        # Nine are refused before their body is read; three are held, no more.
        assert _statuses(socks, 9) == [503] * 9
        assert budget.refused == 9
        assert budget.held == 3 * declared
        assert budget.peak_held <= budget.max_bytes
        # The flooded run can send nothing more; another run on the hub is served as usual.
        with pytest.raises(openai.APIStatusError) as refused:
            _ask(flooded)
        assert refused.value.status_code == 503
        assert "request bodies" in refused.value.message
        assert _ask(other) == "ok"
    finally:
        for sock in socks:
            sock.close()
    deadline = time.monotonic() + 60
    while (budget.held or budget.requests) and time.monotonic() < deadline:
        time.sleep(0.01)  # the hub sees the held requests' clients leave
    assert (budget.held, budget.requests) == (0, 0)
    assert _ask(flooded) == "ok"  # the budget is given back: the run goes on


@pytest.mark.usefixtures("small_budget")
def test_a_chunked_body_is_held_against_the_budget_as_it_arrives(
    hub: ProxyHub, routes: tuple[ProxyRoute, ProxyRoute]
) -> None:
    flooded, _ = routes
    head = (
        f"POST {_path(flooded)} HTTP/1.1\r\nHost: 127.0.0.1:{hub.port}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    chunk = b"%x\r\n%s\r\n" % (256 * 1024, b"x" * 256 * 1024)
    socks: list[socket.socket] = []
    try:
        for _ in range(4):  # 4 x 900 KiB: the fourth passes 3 MiB
            sock = socket.create_connection(("127.0.0.1", hub.port), timeout=30)
            sock.sendall(head + chunk * 3 + b"%x\r\n%s\r\n" % (150 * 1024, b"x" * 150 * 1024))
            socks.append(sock)
        assert _statuses(socks, 1) == [503]
        assert flooded.budget.peak_held <= flooded.budget.max_bytes
    finally:
        for sock in socks:
            sock.close()


def test_requests_in_flight_per_route_are_capped(
    hub: ProxyHub, routes: tuple[ProxyRoute, ProxyRoute]
) -> None:
    flooded, other = routes
    limit = flooded.budget.max_requests
    socks = [_held_post(hub, _path(flooded), 10, 1) for _ in range(limit + 3)]
    try:
        assert _statuses(socks, 3) == [503] * 3
        assert flooded.budget.requests == limit
        assert _ask(other) == "ok"
    finally:
        for sock in socks:
            sock.close()


def test_no_body_is_read_before_its_route_is_known(hub: ProxyHub) -> None:
    # 30 MiB declared, none sent: an unknown route is answered at once, nothing buffered.
    sock = _held_post(hub, "/run/" + "0" * 32 + "/v1/chat/completions", 30 * _MIB, 0)
    with sock:
        assert _statuses([sock], 1) == [404]


def test_a_refusal_for_the_budget_is_worth_a_retry(
    hub: ProxyHub, routes: tuple[ProxyRoute, ProxyRoute]
) -> None:
    flooded, _ = routes
    limit = flooded.budget.max_requests
    socks = [_held_post(hub, _path(flooded), 10, 1) for _ in range(limit + 1)]
    try:
        ready, _, _ = select.select(socks, [], [], 60)
        answer = _whole_answer(ready[0])
        assert answer.startswith("HTTP/1.1 503")
        assert "retry-after: 1" in answer.lower()
        body = json.loads(answer.split("\r\n\r\n", 1)[1])
        assert f"already has {limit} requests in flight" in body["error"]["message"]
    finally:
        for sock in socks:
            sock.close()

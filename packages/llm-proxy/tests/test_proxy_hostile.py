"""Hostile requests to the record proxy over real HTTP: a web page, a rebound host name, a
simple cross-origin POST, a redirecting upstream. None may spend or see the key (issue 20)."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from dsh_llm_proxy import ProxyServer, _guard
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_scripted_server import ScriptedModelServer

KEY_ENV = "DSH_PROXY_TEST_UPSTREAM_KEY"
BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false}'
JSON = {"content-type": "application/json"}


@pytest.fixture
def recording(
    tmp_path: Path, upstream_key: str
) -> Iterator[tuple[ProxyServer, ScriptedModelServer]]:
    with (
        ScriptedModelServer(api_key=upstream_key) as upstream,
        ProxyServer.record(tmp_path, upstream=upstream.base_url, api_key_env=KEY_ENV) as proxy,
    ):
        yield proxy, upstream
    store = JsonlSessionStore(tmp_path)
    try:
        assert [h.id for h in store.list_sessions()] == [], "a refused request was recorded"
    finally:
        store.close()


def _port(proxy: ProxyServer) -> int:
    return int(proxy.base_url.rsplit(":", 1)[1].split("/", 1)[0])


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        pytest.param({"host": "evil.example:{port}"}, 421, "Host", id="host-rebound-name"),
        pytest.param({"host": "evil.example"}, 421, "Host", id="host-no-port"),
        pytest.param({"host": "127.0.0.1:1"}, 421, "Host", id="host-other-port"),
        pytest.param({"host": "127.0.0.1.evil.example:{port}"}, 421, "Host", id="host-suffix"),
        pytest.param({"origin": "http://evil.example"}, 403, "Origin", id="origin-foreign"),
        pytest.param({"origin": "null"}, 403, "Origin", id="origin-null"),
        pytest.param(
            {"sec-fetch-site": "cross-site"}, 403, "Sec-Fetch-Site", id="fetch-cross-site"
        ),
        pytest.param({"sec-fetch-site": "same-site"}, 403, "Sec-Fetch-Site", id="fetch-same-site"),
        pytest.param({"content-type": "text/plain"}, 415, "text/plain", id="ctype-text-plain"),
        pytest.param(
            {"content-type": "application/x-www-form-urlencoded"},
            415,
            "urlencoded",
            id="ctype-form",
        ),
        pytest.param(
            {"content-type": "multipart/form-data; boundary=x"},
            415,
            "multipart",
            id="ctype-multipart",
        ),
        pytest.param({"content-type": ""}, 415, "untyped", id="ctype-missing"),
    ],
)
def test_a_request_that_is_not_from_a_local_program_is_refused_before_the_upstream(
    recording: tuple[ProxyServer, ScriptedModelServer],
    upstream_key: str,
    headers: dict[str, str],
    status: int,
    says: str,
) -> None:
    proxy, upstream = recording
    sent = {**JSON, **{k: v.format(port=_port(proxy)) for k, v in headers.items()}}
    if sent["content-type"] == "":
        del sent["content-type"]
    answer = httpx.post(proxy.base_url + "/chat/completions", content=BODY, headers=sent)
    assert answer.status_code == status
    assert says in answer.json()["error"]["message"]
    assert upstream.requests == []
    assert upstream_key not in answer.text


def test_a_local_client_by_any_loopback_name_is_served(
    recording: tuple[ProxyServer, ScriptedModelServer],
) -> None:
    proxy, upstream = recording
    port = _port(proxy)
    for host, origin in (
        (f"localhost:{port}", f"http://localhost:{port}"),
        (f"127.0.0.1:{port}", None),
    ):
        headers = {**JSON, "host": host, **({"origin": origin} if origin else {})}
        answer = httpx.post(
            proxy.base_url + "/chat/completions",
            content=b"[1]",
            headers=headers,
        )
        assert answer.status_code == 400  # through the guard, refused only as a body
    assert upstream.requests == []


class _Seen(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []
    target = ""

    def do_POST(self) -> None:
        type(self).seen.append(dict(self.headers))
        if self.target:
            self.send_response(307)
            self.send_header("Location", self.target + self.path)
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


def _serve(handler: type[_Seen]) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def test_a_redirecting_upstream_never_gets_the_key_sent_elsewhere(
    tmp_path: Path, upstream_key: str
) -> None:
    class Elsewhere(_Seen):
        seen: ClassVar[list[dict[str, str]]] = []

    class Redirecting(_Seen):
        seen: ClassVar[list[dict[str, str]]] = []

    other, other_url = _serve(Elsewhere)
    Redirecting.target = other_url
    first, first_url = _serve(Redirecting)
    try:
        with ProxyServer.record(tmp_path, upstream=first_url, api_key_env=KEY_ENV) as proxy:
            answer = httpx.post(proxy.base_url + "/chat/completions", content=BODY, headers=JSON)
    finally:
        for server in (first, other):
            server.shutdown()
            server.server_close()
    assert answer.status_code == 307 or answer.status_code >= 400
    assert len(Redirecting.seen) == 1
    assert Elsewhere.seen == []
    assert upstream_key not in answer.text


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_request_body_over_the_bound_is_refused_unread(
    recording: tuple[ProxyServer, ScriptedModelServer],
    monkeypatch: pytest.MonkeyPatch,
    declared: bool,
) -> None:
    proxy, upstream = recording
    monkeypatch.setattr(_guard, "MAX_REQUEST_BYTES", 1024 * 1024)  # the proxy runs in-process
    big = b'{"model":"m","messages":[{"role":"user","content":"' + b"x" * (2 * 1024 * 1024)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    answer = httpx.post(
        proxy.base_url + "/chat/completions",
        content=big if declared else chunks(),
        headers=JSON,
    )
    assert answer.status_code == 413
    assert "over 1048576 bytes" in answer.json()["error"]["message"]
    assert upstream.requests == []
    # a request within the bound still goes through the guard (refused only as a body)
    small = httpx.post(proxy.base_url + "/chat/completions", content=b"[1]", headers=JSON)
    assert small.status_code == 400


def _raw_status(port: int, head: str) -> tuple[int, str]:
    """Send ``head`` (request line and headers, no body framing) with a JSON body over a raw
    socket: an HTTP client would refuse or rewrite the malformed Host values sent here."""
    raw = (
        f"{head}Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + BODY
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(raw)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.decode("latin-1")


@pytest.mark.parametrize(
    "host",
    [
        pytest.param("evil.example@127.0.0.1:{port}", id="userinfo"),
        pytest.param("@127.0.0.1:{port}", id="empty-userinfo"),
        pytest.param("127.0.0.1:{port}/v1", id="path"),
        pytest.param("127.0.0.1:{port}?x", id="query"),
        pytest.param("127.0.0.1:{port}#x", id="fragment"),
        pytest.param("127.0.0.1 :{port}", id="space-before-port"),
        pytest.param("127.0.0.1:{port} evil.example", id="space-after"),
        pytest.param("127.0.0.1:{port},evil.example", id="list"),
        pytest.param("127.0.0.1:", id="empty-port"),
        pytest.param("127.0.0.1:99999", id="port-out-of-range"),
        pytest.param("127.0.0.1:{port}:{port}", id="two-ports"),
        pytest.param("[::1", id="open-bracket"),
        pytest.param("[::1]x:{port}", id="after-bracket"),
        pytest.param("http://127.0.0.1:{port}", id="scheme"),
        pytest.param("", id="empty"),
    ],
)
def test_a_host_that_is_not_uri_host_and_port_is_refused_400(
    recording: tuple[ProxyServer, ScriptedModelServer], upstream_key: str, host: str
) -> None:
    """Red team 4 F16: RFC 9110 ``Host = uri-host [":" port]`` and nothing else."""
    proxy, upstream = recording
    port = _port(proxy)
    status, rest = _raw_status(
        port, f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host.format(port=port)}\r\n"
    )
    assert status == 400
    assert "RFC 9110" in rest
    assert upstream.requests == []
    assert upstream_key not in rest


def test_a_request_without_a_host_is_refused_400(
    recording: tuple[ProxyServer, ScriptedModelServer],
) -> None:
    proxy, upstream = recording
    status, _ = _raw_status(_port(proxy), "POST /v1/chat/completions HTTP/1.1\r\n")
    assert status == 400
    assert upstream.requests == []


def test_an_origin_with_userinfo_is_refused(
    recording: tuple[ProxyServer, ScriptedModelServer],
) -> None:
    proxy, upstream = recording
    port = _port(proxy)
    status, rest = _raw_status(
        port,
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Origin: http://evil.example@127.0.0.1:{port}\r\n",
    )
    assert status == 403
    assert "Origin" in rest
    assert upstream.requests == []


def test_a_bracketed_loopback_host_is_served(
    recording: tuple[ProxyServer, ScriptedModelServer],
) -> None:
    """The strict parse still takes every loopback form: ``[::1]:PORT``, ``LOCALHOST``."""
    proxy, upstream = recording
    port = _port(proxy)
    for host in (f"[::1]:{port}", f"LOCALHOST:{port}", f"127.0.0.2:{port}"):
        head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
        status, rest = _raw_status(port, head)
        # Through the guard to the upstream, which has no script to answer with.
        assert "Host" not in rest, host
        assert status == 410, host
    assert len(upstream.requests) == 3

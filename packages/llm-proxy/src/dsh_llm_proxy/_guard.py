"""Only local programs may spend the proxy's key: a browser page or a rebound name may not.

The proxy listens on 127.0.0.1, but a web page the user opens can still reach it: by a
``fetch`` from the page's origin (a "simple" ``text/plain`` POST needs no preflight), or by
DNS rebinding (the page's own host name made to resolve to 127.0.0.1). Each request is
therefore checked before any route sees it:

- its ``Host`` must be a loopback name (``127.0.0.1``, any ``127.x``, ``localhost``,
  ``[::1]``) with the port the proxy listens on — a rebound name fails here;
- a browser's ``Origin``, when present, must be such a loopback origin too, and
  ``Sec-Fetch-Site`` (sent by every current browser) must not say ``cross-site`` or
  ``same-site``;
- a ``POST`` must say ``Content-Type: application/json`` (415 otherwise): the content types a
  page may send without a CORS preflight are all refused;
- a request body is at most :data:`MAX_REQUEST_BYTES` (413 otherwise), declared or streamed:
  the proxy runs inside the gate, and an agent under test must not grow it without limit.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["MAX_REQUEST_BYTES", "LocalOnly", "is_loopback_host"]

MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""The largest request body the proxy reads; a chat request with a long context is far below."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback_host(name: str) -> bool:
    """Whether ``name`` (no port, brackets allowed) is a loopback address or ``localhost``."""
    name = name.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _split(authority: str) -> tuple[str, int | None] | None:
    """``(host, port)`` of a ``Host`` header value, None when it cannot be parsed."""
    try:
        parts = urlsplit(f"//{authority}")
        return parts.hostname or "", parts.port
    except ValueError:
        return None


def _problem(scope: Scope) -> tuple[int, str] | None:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    server = scope.get("server")
    port = server[1] if server else None
    host = _split(headers.get("host", ""))
    if host is None or not is_loopback_host(host[0]) or (host[1] or 80) != port:
        return 421, "the Host header is not this proxy's loopback address and port"
    origin = headers.get("origin")
    if origin is not None:
        scheme, _, rest = origin.partition("://")
        parsed = _split(rest.split("/", 1)[0]) if scheme in {"http", "https"} else None
        if parsed is None or not is_loopback_host(parsed[0]):
            return 403, "a cross-origin browser request (Origin) is refused"
    if headers.get("sec-fetch-site", "none") in {"cross-site", "same-site"}:
        return 403, "a cross-site browser request (Sec-Fetch-Site) is refused"
    if scope["method"] == "POST":
        kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind != "application/json":
            return 415, f"the request body must be application/json, not {kind or 'untyped'}"
    return None


class LocalOnly:
    """ASGI middleware answering a request from anything but a local program with an error."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = _problem(scope)
            if problem is None and scope["method"] == "POST":
                body, problem = await _bounded_body(scope, receive)
                receive = _replayed(body, receive)
            if problem is not None:
                status, message = problem
                body = json.dumps(
                    {
                        "error": {
                            "message": f"dsh-llm-proxy: {message}",
                            "type": "dsh_llm_proxy_error",
                            "code": "refused",
                        }
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"x-should-retry", b"false"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _too_large() -> tuple[int, str]:
    return 413, f"the request body is over {MAX_REQUEST_BYTES} bytes"


async def _bounded_body(scope: Scope, receive: Receive) -> tuple[bytes, tuple[int, str] | None]:
    """The whole request body, or a 413 as soon as it is known to be over the bound."""
    declared = dict(scope["headers"]).get(b"content-length", b"0")
    if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        return b"", _too_large()  # refused before a byte of it is read
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), None  # the client left: the app sees an empty request
        body += message.get("body", b"")
        if len(body) > MAX_REQUEST_BYTES:
            return b"", _too_large()
        if not message.get("more_body", False):
            return bytes(body), None


def _replayed(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the app the body read already, then the client's own messages
    (a streamed answer listens on it for the client going away)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay

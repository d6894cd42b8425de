"""Only local programs may spend the proxy's key: a browser page or a rebound name may not.

The proxy listens on 127.0.0.1, but a web page the user opens can still reach it: by a
``fetch`` from the page's origin (a "simple" ``text/plain`` POST needs no preflight), or by
DNS rebinding (the page's own host name made to resolve to 127.0.0.1). Each request is
therefore checked before any route sees it:

- its ``Host`` must be exactly ``uri-host [":" port]`` (RFC 9110: no userinfo, path or space;
  400 otherwise), naming a loopback host (``127.0.0.1``, any ``127.x``, ``localhost``,
  ``[::1]``) with the port the proxy listens on — a rebound name fails here (421);
- a browser's ``Origin``, when present, must be such a loopback origin too, and
  ``Sec-Fetch-Site`` (sent by every current browser) must not say ``cross-site`` or
  ``same-site``;
- a ``POST`` must say ``Content-Type: application/json`` (415 otherwise): the content types a
  page may send without a CORS preflight are all refused;
- a request body is at most :data:`MAX_REQUEST_BYTES` (413 otherwise), declared or streamed:
  the proxy runs inside the gate, and an agent under test must not grow it without limit.

One body's bound is not enough: the hub serves every run of the gate process, so an agent
opening many connections would still grow the gate by 32 MiB each (red team 4 F8). Each
route of a hub therefore has a :class:`RouteBudget`: at most :data:`ROUTE_MAX_REQUESTS`
requests in flight and :data:`ROUTE_MAX_BYTES` of request bodies held at once; past either, a
request is answered 503 before its body is read (an SDK retries it later). The hub reads no
body before it knows the route (an unknown one is a 404 unread).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = [
    "MAX_REQUEST_BYTES",
    "ROUTE_MAX_BYTES",
    "ROUTE_MAX_REQUESTS",
    "LocalOnly",
    "RouteBudget",
    "is_loopback_host",
]

MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""The largest request body the proxy reads; a chat request with a long context is far below."""
ROUTE_MAX_REQUESTS = 8
"""Requests one route (one run) answers at once; an agent makes one or two."""
ROUTE_MAX_BYTES = 2 * MAX_REQUEST_BYTES
"""Request body bytes one route holds at once (two requests of the largest size)."""

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


# RFC 9110 ``Host = uri-host [ ":" port ]``, uri-host being RFC 3986's IP-literal or reg-name
# (an IPv4 address is a reg-name's characters). Nothing else: no userinfo ("a@b"), no path, no
# space, no empty port. A lenient URL parser would take "evil.example@127.0.0.1:PORT" as
# userinfo plus a loopback host (red team 4 F16).
_AUTHORITY = re.compile(
    r"(?:\[(?P<literal>[0-9A-Fa-f:.]+)\]|(?P<name>(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+))"
    r"(?::(?P<port>[0-9]{1,5}))?"
)


def _split(authority: str) -> tuple[str, int | None] | None:
    """``(host, port)`` of a ``Host`` header value (or an origin's authority), None when it
    is not exactly ``uri-host [":" port]``."""
    match = _AUTHORITY.fullmatch(authority)
    if match is None:
        return None
    port = match["port"]
    if port is not None and int(port) > 65535:
        return None
    host = match["name"] if match["literal"] is None else f"[{match['literal']}]"
    return host, None if port is None else int(port)


def _problem(scope: Scope) -> tuple[int, str] | None:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    server = scope.get("server")
    port = server[1] if server else None
    host = _split(headers.get("host", ""))
    if host is None:
        return 400, "the Host header is not a host name and port (RFC 9110 uri-host [:port])"
    if not is_loopback_host(host[0]) or (host[1] or 80) != port:
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


class RouteBudget:
    """What one route may hold at once: requests in flight and request body bytes.

    Used from the hub's event loop only (no lock); the counters are read by tests and reports.

    Attributes:
        requests: requests in flight now.
        held: body bytes held now (reserved as declared, or as they arrive).
        peak_held: the most body bytes held at once so far.
        refused: requests answered 503 for the budget so far.
    """

    def __init__(self, max_requests: int | None = None, max_bytes: int | None = None) -> None:
        self.max_requests = ROUTE_MAX_REQUESTS if max_requests is None else max_requests
        self.max_bytes = ROUTE_MAX_BYTES if max_bytes is None else max_bytes
        self.requests = 0
        self.held = 0
        self.peak_held = 0
        self.refused = 0

    def reserve(self, size: int) -> bool:
        """Hold ``size`` more body bytes, unless that would pass the budget."""
        if self.held + size > self.max_bytes:
            return False
        self.held += size
        self.peak_held = max(self.peak_held, self.held)
        return True

    async def serve(self, app: App, scope: Scope, receive: Receive, send: Send) -> None:
        """Run ``app`` for one request within the budget: a request past it is answered 503
        before its body is read; a ``POST``'s body is read (bounded) and held against the
        budget until the answer is out."""
        if self.requests >= self.max_requests:
            self.refused += 1
            await _refuse(send, 503, f"this run already has {self.max_requests} requests in flight")
            return
        self.requests += 1
        held = 0
        try:
            if scope["method"] == "POST":
                body, held, problem = await _bounded_body(scope, receive, self)
                if problem is not None:
                    if problem[0] == 503:
                        self.refused += 1
                    await _refuse(send, *problem)
                    return
                receive = _replayed(body, receive)
            await app(scope, receive, send)
        finally:
            self.requests -= 1
            self.held -= held


class LocalOnly:
    """ASGI middleware answering a request from anything but a local program with an error.

    Args:
        app: the application behind it.
        read_body: read and bound a ``POST``'s body here (a single application); ``False``
            when the application reads it itself within a route's budget (the hub).
    """

    def __init__(self, app: App, *, read_body: bool = True) -> None:
        self.app = app
        self.read_body = read_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = _problem(scope)
            if problem is None and scope["method"] == "POST" and self.read_body:
                body, _, problem = await _bounded_body(scope, receive, None)
                receive = _replayed(body, receive)
            if problem is not None:
                await _refuse(send, *problem)
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps(
        {
            "error": {
                "message": f"dsh-llm-proxy: {message}",
                "type": "dsh_llm_proxy_error",
                "code": "refused",
            }
        }
    ).encode()
    # Over budget (503) is worth a later retry; nothing else is.
    retry = [(b"retry-after", b"1")] if status == 503 else [(b"x-should-retry", b"false")]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *retry,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _too_large() -> tuple[int, str]:
    return 413, f"the request body is over {MAX_REQUEST_BYTES} bytes"


def _over_budget(budget: RouteBudget) -> tuple[int, str]:
    return 503, f"this run already holds {budget.max_bytes} bytes of request bodies"


async def _bounded_body(
    scope: Scope, receive: Receive, budget: RouteBudget | None
) -> tuple[bytes, int, tuple[int, str] | None]:
    """The whole request body and the bytes reserved for it in ``budget``, or a 413 as soon
    as it is known to be over the bound (a 503 past the budget; nothing is then held)."""
    declared = dict(scope["headers"]).get(b"content-length", b"")
    size = int(declared) if declared.isdigit() else None
    if size is not None and size > MAX_REQUEST_BYTES:
        return b"", 0, _too_large()  # refused before a byte of it is read
    held = 0
    if budget is not None and size is not None:
        if not budget.reserve(size):
            return b"", 0, _over_budget(budget)  # refused before a byte of it is read
        held = size
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), held, None  # the client left: the app sees an empty request
        body += message.get("body", b"")
        if len(body) > MAX_REQUEST_BYTES:
            if budget is not None:
                budget.held -= held
            return b"", 0, _too_large()
        if budget is not None and len(body) > held:  # streamed (or past its declared size)
            if not budget.reserve(len(body) - held):
                budget.held -= held
                return b"", 0, _over_budget(budget)
            held = len(body)
        if not message.get("more_body", False):
            return bytes(body), held, None


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

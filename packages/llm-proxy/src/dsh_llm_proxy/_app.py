"""The proxy as a Starlette application: one engine for record, one for replay.

Both serve ``POST /chat/completions`` (also under ``/v1``) and ``GET /models``; both assign
each request to a session with the same :class:`SessionBook`. Record forwards to the upstream
and logs; replay answers from the recorded scripts through ``dsh_llm_replay``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from dsh_core import Chunk, DshError, ModelError, ModelRequest, SessionStore
from dsh_llm_openai import SESSION_HEADER
from dsh_llm_proxy._book import Call, SessionBook, SessionConflictError
from dsh_llm_proxy._defaults import REPORT_PATH
from dsh_llm_proxy._guard import LocalOnly
from dsh_llm_proxy._policy import PolicyGate, PolicyRefusal, RecordPolicy, Slot
from dsh_llm_proxy._scrub import Scrub
from dsh_llm_proxy._wire import ChunkParser, completion_body, sse_events
from dsh_llm_replay import (
    ReplayCallError,
    ReplayModelClient,
    ReplayReport,
    around_difference,
    first_header_difference,
)

__all__ = [
    "REPORT_PATH",
    "RecordEngine",
    "ReplayEngine",
    "build_app",
]


_log = logging.getLogger("dsh_llm_proxy")
_REDACTED = "[redacted]"
# Statuses the OpenAI SDKs do not retry, plus their documented opt-out header: a replay error
# must surface once, with its message, not after three identical attempts.
_NO_RETRY = {"x-should-retry": "false"}
# The SSE end marker at the start of a line: inside a JSON string a newline is escaped, so a
# model that writes "data: [DONE]" in its text cannot be mistaken for it.
_DONE = b"\ndata: [DONE]"


def error_response(status: int, message: str, code: str) -> JSONResponse:
    """An OpenAI-style error body, which every SDK turns into an exception with the message."""
    return JSONResponse(
        {"error": {"message": message, "type": "dsh_llm_proxy_error", "code": code}},
        status_code=status,
        headers=_NO_RETRY,
    )


async def _read_call(
    book: SessionBook,
    request: Request,
    check: Callable[[dict[str, Any]], JSONResponse | None] | None = None,
) -> tuple[dict[str, Any], Call] | JSONResponse:
    """The request's JSON body and the session call it is assigned to, or the error answer
    (``check``'s, when it refuses the body: before any session sees the call)."""
    try:
        body = json.loads(await request.body())
    except ValueError as exc:
        return error_response(400, f"dsh-llm-proxy: the request body is not JSON ({exc})", "json")
    if not isinstance(body, dict):
        return error_response(400, "dsh-llm-proxy: the request body is not an object", "json")
    fields = cast(dict[str, Any], body)
    refused = check(fields) if check is not None else None
    if refused is not None:
        return refused
    try:
        return fields, book.assign(fields, request.headers.get(SESSION_HEADER))
    except SessionConflictError as exc:
        return error_response(409, f"dsh-llm-proxy: {exc}", "session-conflict")


@dataclass
class RecordEngine:
    """Forwards each call to the upstream with the proxy's key and logs it.

    Args:
        store: where the session logs go.
        upstream: the upstream API root (``/chat/completions`` is appended).
        api_key: the upstream key, from the proxy's own environment.
        scrub: applied to every event before it is written.
        policy: what a call may ask before the key is spent on it (see :mod:`._policy`);
            a call outside it is refused and kept in :attr:`refusals`.
    """

    store: SessionStore
    upstream: str
    api_key: str
    timeout: float = 600.0
    scrub: Scrub = field(default_factory=Scrub)
    policy: RecordPolicy = field(default_factory=RecordPolicy)

    def __post_init__(self) -> None:
        self.book = SessionBook(self.store, scrub=self.scrub.value if self.scrub else None)
        self._http: httpx.AsyncClient | None = None
        self.gate = PolicyGate(self.policy)
        self._slot: Slot | None = None

    @property
    def refusals(self) -> list[PolicyRefusal]:
        """The calls the policy refused so far, in order (a run with any has failed)."""
        return list(self.gate.refusals)

    def _admit(self, body: dict[str, Any]) -> JSONResponse | None:
        admitted = self.gate.admit(body)
        if isinstance(admitted, PolicyRefusal):
            _log.warning("%s", admitted)
            return error_response(
                admitted.status, f"dsh-llm-proxy: {admitted}", f"policy-{admitted.limit}"
            )
        self._slot = admitted  # taken at once by chat(): nothing awaits in between
        return None

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            # Never follow a redirect: the key goes to the configured upstream and nowhere else.
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout, connect=10.0), follow_redirects=False
            )
        return self._http

    async def aclose(self) -> None:
        """Close every session and the upstream connection pool (the store is the caller's)."""
        self.book.close()
        if self._http is not None:
            await self._http.aclose()

    def _redact(self, data: bytes) -> bytes:
        return data.replace(self.api_key.encode(), _REDACTED.encode()) if self.api_key else data

    def _headers(self, session_id: str | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.api_key}", "Accept-Encoding": "identity"}
        if session_id is not None:
            headers[SESSION_HEADER] = session_id
        return headers

    async def models(self, request: Request) -> Response:
        """``GET /models``, passed through (the key added, nothing else)."""
        url = self.upstream.rstrip("/") + "/models"
        try:
            upstream = await self.http.get(url, headers=self._headers())
        except httpx.HTTPError as exc:
            return error_response(502, f"dsh-llm-proxy: upstream unreachable: {exc}", "upstream")
        return Response(
            self._redact(upstream.content),
            status_code=upstream.status_code,
            media_type=upstream.headers.get("content-type", "application/json"),
        )

    async def chat(self, request: Request) -> Response:
        """``POST /chat/completions``: checked against the policy, forwarded, streamed back,
        logged."""
        read = await _read_call(self.book, request, self._admit)
        if isinstance(read, JSONResponse):
            if self._slot is not None:  # admitted, then refused by the session book
                self._slot.release()
                self._slot = None
            return read
        body, call = read
        slot, self._slot = self._slot, None
        assert slot is not None  # _admit passed
        try:
            return await self._forward(body, call, slot)
        except BaseException:
            slot.release()
            raise

    async def _forward(self, body: dict[str, Any], call: Call, slot: Slot) -> Response:
        wants_stream = body.get("stream") is True
        forwarded = dict(body)
        if not wants_stream:
            # Always stream from the upstream: the log keeps real chunk timings, and the
            # client still gets one completion object.
            forwarded["stream"] = True
            forwarded["stream_options"] = {"include_usage": True}
        url = self.upstream.rstrip("/") + "/chat/completions"
        upstream_request = self.http.build_request(
            "POST", url, json=forwarded, headers=self._headers(call.session_id)
        )
        try:
            upstream = await self.http.send(upstream_request, stream=True)
        except httpx.HTTPError as exc:
            self.book.abandon(call)
            slot.release()
            return error_response(502, f"dsh-llm-proxy: upstream unreachable: {exc}", "upstream")
        if upstream.status_code != 200:
            data = self._redact(await upstream.aread())
            await upstream.aclose()
            self.book.abandon(call)
            slot.release()
            return Response(
                data,
                status_code=upstream.status_code,
                media_type=upstream.headers.get("content-type", "application/json"),
                headers={k: v for k, v in upstream.headers.items() if k.lower() == "retry-after"},
            )
        relay = _Relay(self.book, call, upstream, ChunkParser(), slot.release)
        if wants_stream:
            return StreamingResponse(
                relay.events(),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", SESSION_HEADER: call.session_id},
            )
        async for _ in relay.events():
            pass
        if relay.chunks is None:
            return error_response(502, f"dsh-llm-proxy: {relay.failure}", "upstream")
        model = str(body.get("model", ""))
        return JSONResponse(
            completion_body([c for _, c in relay.chunks], model),
            headers={SESSION_HEADER: call.session_id},
        )


class _Relay:
    """One upstream answer on its way back: forwarded as it arrives, parsed, then logged."""

    def __init__(
        self,
        book: SessionBook,
        call: Call,
        upstream: httpx.Response,
        parser: ChunkParser,
        ended: Callable[[], None] = lambda: None,
    ) -> None:
        self._ended = ended
        self._book = book
        self._call = call
        self._upstream = upstream
        self._parser = parser
        self.chunks: list[tuple[int, Chunk]] | None = None
        self.failure = ""

    async def _finish(self) -> None:
        chunks = await self._parser.end()
        self._book.finish(self._call, chunks)
        self.chunks = chunks

    async def events(self) -> AsyncIterator[bytes]:
        """The upstream body, piece by piece; an in-stream error event if it breaks."""
        tail = b"\n"  # the body's start counts as a line start
        try:
            async for data in self._upstream.aiter_bytes():
                if self.chunks is None:
                    self._parser.feed(data)
                    # Log the call before the client sees its end: a client that sends its
                    # next request at once must find this session's call finished.
                    if _DONE in tail + data:
                        await self._finish()
                    tail = (tail + data)[-len(_DONE) :]
                yield data
            if self.chunks is None:
                await self._finish()
        except (httpx.HTTPError, ModelError) as exc:
            self.failure = f"the upstream stream failed: {exc}"
            _log.warning("session %s: call not recorded: %s", self._call.session_id, exc)
            # The OpenAI SDKs raise on an event carrying "error"; others see a stream that
            # ends without its finish.
            error = {"error": {"message": f"dsh-llm-proxy: {self.failure}", "code": "upstream"}}
            yield f"data: {json.dumps(error)}\n\n".encode()
        finally:
            if self.chunks is None:
                await self._parser.cancel()
                self._book.abandon(self._call)
            try:
                await self._upstream.aclose()
            finally:
                self._ended()


@dataclass
class ReplayEngine:
    """Answers from recorded scripts, keylessly, by ``dsh_llm_replay``'s binding rules.

    ``scrub`` is applied to the recorded and the live request before they are compared, and
    puts the live values of its literals back into the answers (see :class:`Scrub`).

    ``accept_drift``: a request that differs from the recorded one (prompt, system prompt,
    tools, model settings) is answered with the recorded answer all the same, and the
    difference is kept in :attr:`accepted` instead of refusing it with HTTP 422. A recording
    proxy in front of such a replay writes the new requests with the old answers: a
    request-side change accepted without asking the model again.
    """

    client: ReplayModelClient
    models_seen: Sequence[str] = ()
    recorded_inputs: Mapping[str, Sequence[Sequence[str]]] = field(
        default_factory=dict[str, Sequence[Sequence[str]]]
    )
    scrub: Scrub = field(default_factory=Scrub)
    accept_drift: bool = False

    def __post_init__(self) -> None:
        self.book = SessionBook(None)
        self._calls: dict[str, int] = {}
        self._mismatches: list[str] = []
        self.accepted: list[str] = []
        """The request differences answered anyway (``accept_drift``), in order."""

    def _mismatch(self, call: Call) -> str | None:
        """How the live call's new messages differ from the recorded call's, if they do."""
        number = self._calls[call.session_id] = self._calls.get(call.session_id, 0) + 1
        scripts = {s.session_id: s.script for s in self.client.report().sessions}
        source = scripts.get(call.session_id)
        recorded = self.recorded_inputs.get(source or "", ())
        if source is None or number > len(recorded):
            return None  # unrecorded or exhausted: the replay client says so itself
        drift = self._drift(call, source, number)
        if drift is not None:
            return drift
        expected = [self.scrub.text(i) for i in recorded[number - 1]]
        live = [self.scrub.text(i) for i in call.inputs()]
        if expected == live:
            return None
        recorded, got = around_difference(_joined(expected), _joined(live))
        return (
            f"session {call.session_id} (script {source}) call {number}: the request's new "
            f"messages differ from the recording: recorded {recorded}, got {got}"
        )

    def _drift(self, call: Call, source: str, number: int) -> str | None:
        """How the call's model, system prompt or tools differ from the recorded call's."""
        script = next((s for s in self.client.scripts if s.source == source), None)
        expected = None if script is None else script.request_headers.for_call(number)
        if expected is None:
            return None  # a recording without headers cannot be checked
        difference = first_header_difference(
            self.scrub.value(expected), self.scrub.value(call.request_header)
        )
        if difference is None:
            return None
        return (
            f"session {call.session_id} (script {source}) call {number}: request drift: "
            f"{difference}"
        )

    @property
    def mismatches(self) -> tuple[str, ...]:
        """The requests refused as differing from their recorded call (request drift, other
        new messages), in order: what a keyless accept of the new requests would take."""
        return tuple(self._mismatches)

    async def aclose(self) -> None:
        """Nothing to release; the report is read by whoever owns the engine."""

    def report(self) -> ReplayReport:
        """The consumption report so far (``ok`` once every script was used exactly and every
        request matched its recorded one)."""
        report = self.client.report()
        if self._mismatches:
            # The refused request is the cause, the unconsumed rest its consequence ("made 1
            # of 2 recorded calls"): a reader sees the first problem first.
            problems = [*self._mismatches, *report.problems]
            report = report.model_copy(update={"problems": problems, "ok": False})
        return report

    async def report_endpoint(self, request: Request) -> Response:
        """``GET /_dsh/report`` (with ``accept_drift``, also ``accepted``: the request
        differences answered anyway)."""
        body = self.report().as_json()
        if self.accept_drift:
            body["accepted"] = list(self.accepted)
        return JSONResponse(body)

    async def models(self, request: Request) -> Response:
        """``GET /models``: the models the recording asked for."""
        data = [{"id": m, "object": "model", "owned_by": "dsh-llm-proxy"} for m in self.models_seen]
        return JSONResponse({"object": "list", "data": data})

    async def chat(self, request: Request) -> Response:
        """``POST /chat/completions`` from the recording."""
        read = await _read_call(self.book, request)
        if isinstance(read, JSONResponse):
            return read
        body, call = read
        chunks = self.scrub.restored(
            self.client.stream(ModelRequest(session_id=call.session_id, messages=[]))
        )
        model = str(body.get("model", ""))
        # Pull the first chunk before answering, so that a call the recording cannot serve is
        # an HTTP error, not a broken stream.
        collected: list[Chunk] = []
        try:
            first = await anext(aiter(chunks), None)
        except ReplayCallError as exc:
            self.book.abandon(call)
            return error_response(422, f"dsh-llm-proxy replay ({exc.kind}): {exc}", exc.kind)
        except ModelError as exc:
            self.book.abandon(call)
            return error_response(exc.status or 500, exc.message, exc.code or "model-error")
        if first is not None:
            collected.append(first)
        mismatch = self._mismatch(call)
        if mismatch is not None and self.accept_drift:
            self.accepted.append(mismatch)
        elif mismatch is not None:
            self._mismatches.append(mismatch)
            self.book.abandon(call)
            return error_response(422, f"dsh-llm-proxy replay: {mismatch}", "request-mismatch")
        if body.get("stream") is True:
            return StreamingResponse(
                self._stream(call, collected, chunks, model),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", SESSION_HEADER: call.session_id},
            )
        try:
            collected.extend([c async for c in chunks])
        except ModelError as exc:
            self.book.abandon(call)
            return error_response(exc.status or 500, exc.message, exc.code or "model-error")
        self.book.finish(call, [(call.received, c) for c in collected])
        return JSONResponse(
            completion_body(collected, model), headers={SESSION_HEADER: call.session_id}
        )

    async def _stream(
        self, call: Call, head: list[Chunk], rest: AsyncIterator[Chunk], model: str
    ) -> AsyncIterator[bytes]:
        seen: list[Chunk] = []

        async def chunks() -> AsyncIterator[Chunk]:
            for chunk in [*head]:
                seen.append(chunk)
                yield chunk
            async for chunk in rest:
                seen.append(chunk)
                yield chunk

        finished = False
        try:
            async for event in sse_events(chunks(), model):
                if event.startswith(_DONE[1:]):  # finish first: the client may call at once
                    self.book.finish(call, [(call.received, c) for c in seen])
                    finished = True
                yield event
        finally:
            if not finished:
                self.book.abandon(call)


def _joined(inputs: Sequence[str]) -> str:
    """A call's new messages as one text (each one a line) for :func:`around_difference`."""
    return "\n".join(inputs)


Engine = RecordEngine | ReplayEngine


def build_app(engine: Engine, on_shutdown: Callable[[], None] | None = None) -> Starlette:
    """The ASGI application serving ``engine``."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        try:
            yield
        finally:
            await engine.aclose()
            if on_shutdown is not None:
                on_shutdown()

    routes = [
        Route(path, engine.chat, methods=["POST"])
        for path in ("/chat/completions", "/v1/chat/completions")
    ]
    routes += [Route(path, engine.models, methods=["GET"]) for path in ("/models", "/v1/models")]
    if isinstance(engine, ReplayEngine):
        routes.append(Route(REPORT_PATH, engine.report_endpoint, methods=["GET"]))
    return Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(LocalOnly)])


def api_key_from_env(name: str) -> str:
    """The upstream key from the environment variable ``name``.

    Raises:
        DshError: it is not set (the message names the variable, never a value).
    """
    key = os.environ.get(name, "")
    if not key:
        raise DshError(f"dsh-llm-proxy record: the upstream API key is not set ({name})")
    return key

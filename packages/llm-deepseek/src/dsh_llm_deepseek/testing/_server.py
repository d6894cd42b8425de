"""``ScriptedModelServer``: a real HTTP server on 127.0.0.1 that plays scripted responses.

It speaks DeepSeek's OpenAI-compatible streaming protocol at ``/chat/completions`` and routes
each request by its ``X-DSH-Session-Id`` header to that session's script.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from dsh_core import Chunk
from dsh_llm_deepseek._client import SESSION_HEADER
from dsh_llm_deepseek._settings import SERVED_MODELS
from dsh_llm_deepseek.testing._encode import ChunkEncoder
from dsh_llm_deepseek.testing._script import (
    Fault,
    Pause,
    Response,
    load_script_file,
    validate_script,
)

__all__ = ["RecordedRequest", "Router", "ScriptedModelServer"]

Router = Callable[[dict[str, Any] | None], tuple[Response | None, str | None]]
"""Answers a chat request body by content (see ``ScriptLibrary.route``): a response, or
``None`` and the reason."""

_log = logging.getLogger("dsh_llm_deepseek.testing")


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received.

    Attributes:
        session_id: the ``X-DSH-Session-Id`` header (``None`` when missing).
        call: 1-based number of this request among the session's requests.
        body: the decoded JSON body (``None`` when it was not JSON).
        received_at: ``time.monotonic()`` when the request was read.
        status: the HTTP status the server answered with.
        error: the server's error message, for requests it could not serve from a script.
        authorized: whether an ``Authorization: Bearer …`` header was present.
        path: the request path.
    """

    session_id: str | None
    call: int
    body: dict[str, Any] | None
    received_at: float
    status: int
    error: str | None
    authorized: bool
    path: str


@dataclass(slots=True)
class _Script:
    responses: list[Response]
    cursor: int = 0


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: ScriptedModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Log instead of printing to stderr; a client hanging up is not worth a line."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):
            return
        _log.error("scripted model server: error serving %s", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def owner(self) -> ScriptedModelServer:
        return cast(_HTTPServer, self.server).owner

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's per-request stderr lines."""

    def do_POST(self) -> None:
        try:
            self._serve()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            # The client gave up (timeout, cancellation): nothing left to answer.
            self.close_connection = True

    def do_GET(self) -> None:
        try:
            self._serve_models()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def _serve_models(self) -> None:
        """``GET /models``: the served model list, as DeepSeek's API answers it."""
        owner = self.owner
        received = time.monotonic()
        auth = self.headers.get("Authorization") or ""
        authorized = auth.startswith("Bearer ") and len(auth) > len("Bearer ")
        session_id = self.headers.get(SESSION_HEADER)
        if not self.path.rstrip("/").endswith("/models"):
            owner._record(
                session_id, 0, None, received, 404, "no such endpoint", authorized, self.path
            )
            self._error(404, f"no such endpoint: {self.path}", session_id, 0)
            return
        if (owner.api_key is not None and auth != f"Bearer {owner.api_key}") or not authorized:
            owner._record(session_id, 0, None, received, 401, "bad API key", authorized, self.path)
            self._error(401, "Authentication Fails, Your api key is invalid", session_id, 0)
            return
        fault = owner.models_fault
        if fault is not None and fault.kind == "status":
            owner._record(
                session_id, 0, None, received, fault.status_code, None, authorized, self.path
            )
            self._fault(fault, session_id, 0)
            return
        owner._record(session_id, 0, None, received, 200, None, authorized, self.path)
        payload = json.dumps(
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "owned_by": "deepseek"} for m in owner.models
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _serve(self) -> None:
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        received = time.monotonic()
        body: dict[str, Any] | None = None
        try:
            decoded = json.loads(raw)
            if isinstance(decoded, dict):
                body = cast(dict[str, Any], decoded)
        except ValueError:
            pass
        auth = self.headers.get("Authorization") or ""
        authorized = auth.startswith("Bearer ") and len(auth) > len("Bearer ")
        session_id = self.headers.get(SESSION_HEADER)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            owner._record(
                session_id, 0, body, received, 404, "no such endpoint", authorized, self.path
            )
            self._error(404, f"no such endpoint: {self.path}", session_id, 0)
            return
        if owner.api_key is not None and auth != f"Bearer {owner.api_key}":
            owner._record(session_id, 0, body, received, 401, "bad API key", authorized, self.path)
            self._error(401, "Authentication Fails, Your api key is invalid", session_id, 0)
            return
        call, response, error = owner._next_response(session_id, body)
        if response is None:
            message = error or "no response"
            owner._record(session_id, call, body, received, 500, message, authorized, self.path)
            self._error(500, message, session_id, call)
            return
        status = (
            response.status_code
            if isinstance(response, Fault) and (response.kind == "status")
            else 200
        )
        owner._record(session_id, call, body, received, status, None, authorized, self.path)
        model = str((body or {}).get("model", "scripted"))
        if not isinstance(response, Fault):
            self._stream(model, response, None)
        elif response.kind == "status":
            self._fault(response, session_id, call)
        elif response.kind == "empty":
            self._stream(model, [{"type": "finish", "reason": {"kind": "stop"}}], None)
        elif response.kind == "drop-after":
            self._stream(model, response.chunks, response.after)
        else:
            if owner._stopping.wait(response.seconds):
                self.close_connection = True
                return
            self._stream(model, response.chunks, None)

    def _fault(self, fault: Fault, session_id: str | None, call: int) -> None:
        if fault.body is not None:
            kind = "text/html" if fault.body.lstrip().startswith("<") else "text/plain"
            self._send(fault.status_code, fault.body.encode(), kind, fault.retry_after)
            return
        message = fault.message or f"scripted HTTP {fault.status_code}"
        self._error(fault.status_code, message, session_id, call, retry_after=fault.retry_after)

    def _error(
        self,
        status: int,
        message: str,
        session_id: str | None,
        call: int,
        *,
        retry_after: float | None = None,
    ) -> None:
        payload = json.dumps(
            {
                "error": {
                    "message": message,
                    "type": "scripted_error",
                    "session": session_id,
                    "call": call,
                }
            }
        ).encode()
        self._send(status, payload, "application/json", retry_after)

    def _send(
        self, status: int, payload: bytes, content_type: str, retry_after: float | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        if retry_after is not None:
            self.send_header("Retry-After", f"{retry_after:g}")
        self.end_headers()
        self.wfile.write(payload)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream(self, model: str, chunks: Sequence[Chunk | Pause], drop_after: int | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        encoder = ChunkEncoder(model)
        sent = 0

        def send(event: dict[str, Any] | str) -> bool:
            nonlocal sent
            if drop_after is not None and sent >= drop_after:
                return False
            data = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
            self._write_chunk(f"data: {data}\n\n".encode())
            sent += 1
            return True

        self._write_chunk(f"data: {json.dumps(encoder.preamble())}\n\n".encode())
        for item in chunks:
            if isinstance(item, Pause):
                item._reached.set()
                while not item._released.wait(0.05):
                    if self.owner._stopping.is_set():
                        self._drop()
                        return
                continue
            for event in encoder.encode(item):
                if not send(event):
                    self._drop()
                    return
        for event in encoder.close():
            if not send(event):
                self._drop()
                return
        if encoder.finished and not send("[DONE]"):
            self._drop()
            return
        if drop_after is not None:
            self._drop()
            return
        self._write_chunk(b"")  # the terminating zero-length chunk

    def _drop(self) -> None:
        """Cut the connection without ending the chunked body."""
        self.close_connection = True
        with contextlib.suppress(OSError):  # already gone
            self.connection.shutdown(socket.SHUT_RDWR)


class ScriptedModelServer:
    """A scripted OpenAI-compatible SSE model server on 127.0.0.1, for tests.

    Use it as a context manager (or :meth:`start` / :meth:`close`). Each session's script is a
    list of responses: chunk lists (the dsh ``Chunk`` union, optionally with :class:`Pause`
    markers) or :class:`Fault`\\ s; every request of the session consumes the next one.
    :meth:`add_session` queues a script for the next session id the server has not seen;
    :meth:`set_session` binds one to an explicit id. A request from an unknown session with
    nothing queued, or past the end of its script, gets HTTP 500 with a JSON error body naming
    the session and call number; it is recorded like every other request.

    Args:
        sessions: scripts to queue, as by :meth:`add_session`, in order.
        api_key: when set, requests must carry ``Authorization: Bearer <api_key>`` (else 401).
        port: the port to listen on (0 picks a free one).
        router: when given, answers every chat request by its content instead of the session
            scripts (a ``ScriptLibrary``'s ``route``).
    """

    def __init__(
        self,
        sessions: Sequence[Sequence[Response]] = (),
        *,
        api_key: str | None = None,
        port: int = 0,
        models: Sequence[str] = SERVED_MODELS,
        models_fault: Fault | None = None,
        router: Router | None = None,
    ) -> None:
        self.api_key = api_key
        self.models = tuple(models)
        self.models_fault = models_fault
        self.router = router
        self._port = port
        self._lock = threading.Lock()
        self._queued: deque[_Script] = deque()
        self._bound: dict[str, _Script] = {}
        self._calls: dict[str | None, int] = {}
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        for i, script in enumerate(sessions):
            self._queued.append(_Script(validate_script(script, path=f"sessions[{i}]")))

    @classmethod
    def from_file(
        cls, path: str | Path, *, api_key: str | None = None, port: int = 0
    ) -> ScriptedModelServer:
        """A server with the sessions of a JSON script file queued in order.

        Raises:
            ScriptError: the file is invalid (the message names the JSON path).
        """
        return cls(load_script_file(path), api_key=api_key, port=port)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ScriptedModelServer:
        """Bind 127.0.0.1 and serve in a background thread."""
        if self._httpd is not None:
            return self
        httpd = _HTTPServer(("127.0.0.1", self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-model-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; pauses and slow responses are cut short."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (the client appends ``/chat/completions``)."""
        if self._httpd is None:
            raise RuntimeError("the scripted model server is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    # --- scripts -----------------------------------------------------------------------------

    def add_session(self, responses: Sequence[Response]) -> None:
        """Queue a script for the next new session id, in order of their first requests.

        Raises:
            ScriptError: a chunk is not a valid dsh chunk (the message says which).
        """
        script = _Script(validate_script(responses))
        with self._lock:
            self._queued.append(script)

    def set_session(self, session_id: str, responses: Sequence[Response]) -> None:
        """Bind a script to an explicit session id (replacing any script it had)."""
        script = _Script(validate_script(responses))
        with self._lock:
            self._bound[session_id] = script

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, session_id: str) -> list[RecordedRequest]:
        """The requests of one session, in order."""
        return [r for r in self.requests if r.session_id == session_id]

    def unconsumed(self) -> list[str]:
        """Sentences naming every queued script never bound and every unfinished script."""
        with self._lock:
            out = [
                f"queued script #{i + 1} ({len(s.responses)} responses) was never bound"
                for i, s in enumerate(self._queued)
            ]
            out.extend(
                f"session {sid!r} consumed {s.cursor} of {len(s.responses)} responses"
                for sid, s in self._bound.items()
                if s.cursor < len(s.responses)
            )
        return out

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` listing :meth:`unconsumed` problems, if any."""
        problems = self.unconsumed()
        if problems:
            raise AssertionError("scripted model server: " + "; ".join(problems))

    # --- called by the handler threads ---------------------------------------------------------

    def _next_response(
        self, session_id: str | None, body: dict[str, Any] | None = None
    ) -> tuple[int, Response | None, str | None]:
        with self._lock:
            call = self._calls.get(session_id, 0) + 1
            self._calls[session_id] = call
        if self.router is not None:
            return (call, *self.router(body))
        with self._lock:
            if session_id is None:
                return call, None, f"request without a {SESSION_HEADER} header (call {call})"
            script = self._bound.get(session_id)
            if script is None:
                if not self._queued:
                    return (
                        call,
                        None,
                        (
                            f"no script for session {session_id!r} (call {call}): "
                            "it is not bound and no script is queued"
                        ),
                    )
                script = self._queued.popleft()
                self._bound[session_id] = script
            if script.cursor >= len(script.responses):
                return (
                    call,
                    None,
                    (
                        f"session {session_id!r} exhausted its script: call {call},"
                        f" script has {len(script.responses)} responses"
                    ),
                )
            response = script.responses[script.cursor]
            script.cursor += 1
            return call, response, None

    def _record(
        self,
        session_id: str | None,
        call: int,
        body: dict[str, Any] | None,
        received: float,
        status: int,
        error: str | None,
        authorized: bool,
        path: str,
    ) -> None:
        with self._lock:
            self._requests.append(
                RecordedRequest(session_id, call, body, received, status, error, authorized, path)
            )

"""The scripted server's request handler: ``GET /models`` and ``POST /chat/completions``.

Every request is recorded. Strict mode (``ScriptedModelServer(strict=True)``) answers as the
live API does today (``_contract``): a bearer key is required, unknown models and tool-call
turns without ``reasoning_content`` in thinking mode get the real HTTP 400, before any script
response is consumed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, cast

from dsh_core import Chunk
from dsh_llm_openai import SESSION_HEADER, ChunkEncoder
from dsh_scripted_server._contract import api_error, check_chat_body, model_list
from dsh_scripted_server._faults import Fault, Pause

if TYPE_CHECKING:
    from dsh_scripted_server._server import ScriptedModelServer

__all__ = ["SCRIPT_MISS_STATUS", "HTTPServer"]

# A request the script has no answer for (exhausted, unbound, no session header): 410 Gone, a
# 4xx no client retries (ours retries 429 and 5xx, the OpenAI SDK 408/409/429/5xx), so the error
# names the call that missed, not the call a retry reached.
SCRIPT_MISS_STATUS = 410

_log = logging.getLogger("dsh_scripted_server")
_Facts = tuple[str | None, int, dict[str, Any] | None, float, bool]
"""(session id, call, body, received at, a bearer key was sent) of one request."""
_EMPTY_COMPLETION: list[Chunk] = [{"type": "finish", "reason": {"kind": "stop"}}]


class HTTPServer(ThreadingHTTPServer):
    """The stdlib server, bound to its :class:`ScriptedModelServer`."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], owner: ScriptedModelServer) -> None:
        self.owner = owner
        super().__init__(address, _Handler)

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
        return cast(HTTPServer, self.server).owner

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's per-request stderr lines."""

    def do_POST(self) -> None:
        self._guarded(self._serve_chat)

    def do_GET(self) -> None:
        self._guarded(self._serve_models)

    def _guarded(self, serve: Any) -> None:
        try:
            serve()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            # The client gave up (timeout, cancellation): nothing left to answer.
            self.close_connection = True

    # --- the request's facts -------------------------------------------------------------------

    def _read_body(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            decoded = json.loads(raw)
        except ValueError:
            return None
        return cast(dict[str, Any], decoded) if isinstance(decoded, dict) else None

    def _auth(self) -> tuple[bool, bool]:
        """(a bearer key was sent, the server accepts it)."""
        auth = self.headers.get("Authorization") or ""
        present = auth.startswith("Bearer ") and len(auth) > len("Bearer ")
        key = self.owner.api_key
        if key is not None:
            return present, auth == f"Bearer {key}"
        return present, present or not self.owner.strict

    def _note(self, record: _Facts, status: int, error: str | None = None) -> None:
        session_id, call, body, received, present = record
        self.owner._record(session_id, call, body, received, status, error, present, self.path)

    def _refuse(self, status: int, message: str | None, record: _Facts) -> None:
        session_id, call = record[0], record[1]
        text = message or api_error(status)["error"]["message"]
        self._note(record, status, text)
        if self.owner.strict:
            self._send(status, json.dumps(api_error(status, message)).encode(), "application/json")
        else:
            self._error(status, text, session_id, call)

    # --- GET /models ---------------------------------------------------------------------------

    def _serve_models(self) -> None:
        owner = self.owner
        received = time.monotonic()
        present, accepted = self._auth()
        session_id = self.headers.get(SESSION_HEADER)
        record = (session_id, 0, None, received, present)
        if not self.path.rstrip("/").endswith("/models"):
            self._refuse(404, f"no such endpoint: {self.path}", record)
            return
        if not accepted:
            self._refuse(401, None, record)
            return
        fault = owner.models_fault
        if fault is not None:
            owner._record(
                session_id, 0, None, received, fault.status_code, None, present, self.path
            )
            self._fault(fault, session_id, 0)
            return
        owner._record(session_id, 0, None, received, 200, None, present, self.path)
        self._send(
            200,
            json.dumps(model_list(owner.models, owner.profile.provider)).encode(),
            "application/json",
        )

    # --- POST /chat/completions ----------------------------------------------------------------

    def _serve_chat(self) -> None:
        owner = self.owner
        body = self._read_body()
        received = time.monotonic()
        present, accepted = self._auth()
        session_id = self.headers.get(SESSION_HEADER)
        record = (session_id, 0, body, received, present)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._refuse(404, f"no such endpoint: {self.path}", record)
            return
        if not accepted:
            self._refuse(401, None, record)
            return
        if owner.strict:
            invalid = check_chat_body(body, owner.models, owner.profile)
            if invalid is not None:  # the live API refuses it before any work: nothing consumed
                self._refuse(400, invalid, record)
                return
        if owner.chat_fault is not None:
            fault = owner.chat_fault
            owner._record(
                session_id, 0, body, received, fault.status_code, None, present, self.path
            )
            self._fault(fault, session_id, 0)
            return
        call, response, error = owner._next_response(session_id, body)
        if response is None:
            message = error or "no response"
            miss = SCRIPT_MISS_STATUS
            owner._record(session_id, call, body, received, miss, message, present, self.path)
            self._error(miss, message, session_id, call)
            return
        status = response.status_code if isinstance(response, Fault) else 200
        if isinstance(response, Fault) and response.kind != "status":
            status = 200
        owner._record(session_id, call, body, received, status, None, present, self.path)
        model = str((body or {}).get("model", "scripted"))
        if not isinstance(response, Fault):
            self._stream(model, response, None)
        elif response.kind == "status":
            self._fault(response, session_id, call)
        elif response.kind == "empty":
            self._stream(model, _EMPTY_COMPLETION, None)
        elif response.kind == "raw":
            self._raw(response.parts)
        elif response.kind == "drop-after":
            self._stream(model, response.chunks, response.after)
        else:
            if owner._stopping.wait(response.seconds):
                self.close_connection = True
                return
            self._stream(model, response.chunks, None)

    # --- answers -------------------------------------------------------------------------------

    def _fault(self, fault: Fault, session_id: str | None, call: int) -> None:
        if fault.body is not None:
            kind = "text/html" if fault.body.lstrip().startswith("<") else "text/plain"
            self._send(fault.status_code, fault.body.encode(), kind, fault.retry_after)
        elif self.owner.strict:
            payload = json.dumps(api_error(fault.status_code, fault.message)).encode()
            self._send(fault.status_code, payload, "application/json", fault.retry_after)
        else:
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

    def _raw(self, parts: Sequence[str | float]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for part in parts:
            if isinstance(part, str):
                self._write_chunk(part.encode())
            elif self.owner._stopping.wait(part):
                self._drop()
                return
        self._write_chunk(b"")

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

"""``ScriptedModelServer``: a real HTTP server on 127.0.0.1 that plays scripted responses.

It speaks the OpenAI-compatible streaming protocol at ``/chat/completions`` (and serves
``GET /models``), as the profile it is given plays it, and routes each chat request by its
``X-DSH-Session-Id`` header to that session's script.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from dsh_core import PlayerScript, ScriptPlayer
from dsh_llm_openai import SESSION_HEADER, ChatSettings
from dsh_scripted_server._handler import HTTPServer
from dsh_scripted_server._profile import Profile, client_env, default_models, resolve_profile
from dsh_scripted_server._script import (
    Fault,
    Response,
    ScriptItem,
    load_script_file,
    validate_script,
)

__all__ = ["RecordedRequest", "Router", "ScriptedModelServer"]

Router = Callable[[dict[str, Any] | None], tuple[Response | None, str | None]]
"""Answers a chat request body by content (see ``ScriptLibrary.route``): a response, or
``None`` and the reason."""


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


class ScriptedModelServer:
    """A scripted OpenAI-compatible SSE model server on 127.0.0.1, for tests.

    Use it as a context manager (or :meth:`start` / :meth:`close`). Each session's script is a
    list of responses in the entry vocabulary every dsh script player shares
    (``dsh_core.ChunksEntry``, ``ThrowEntry``, ``HangEntry``; a bare chunk list, optionally
    with :class:`Pause` markers, is short for a ``ChunksEntry``) plus the HTTP-only
    :class:`Fault`\\ s; every request of the session consumes the next one. Binding and
    counting are ``dsh_core.ScriptPlayer``'s: :meth:`add_session` queues a script for the next
    session id the server has not seen; :meth:`set_session` binds one to an explicit id. A
    request from an unknown session with nothing queued, or past the end of its script, gets
    HTTP 410 with a JSON error body naming the session and call number (a 4xx, so no client
    retries it and the call named is the one that missed); it is recorded like every other
    request.

    The server plays one *profile*: a ``dsh_llm_openai.ChatSettings`` class (or the name of
    an installed ``dsh.models`` provider whose settings are one), the generic
    OpenAI-compatible API by default. ``GET /models`` lists ``models`` (the profile's served
    models unless given). In strict mode the server behaves as the profile's live API does
    (see ``_contract``): a bearer key is required (401), a model it does not serve, or a body
    the profile's ``wire_problem`` refuses (DeepSeek: a tool-call turn without
    ``reasoning_content`` in thinking mode), gets a real HTTP 400 body (the request consumes
    no script response), and every error body has the live shape.

    Args:
        sessions: scripts to queue, as by :meth:`add_session`, in order.
        api_key: when set, requests must carry ``Authorization: Bearer <api_key>`` (else 401).
        port: the port to listen on (0 picks a free one).
        strict: behave as the live API does (above).
        models: the model ids ``GET /models`` serves (and strict mode accepts); the
            profile's ``served_models`` (else its default model) when omitted.
        profile: the API played: a ``ChatSettings`` class or a ``dsh.models`` provider name.
        models_fault: a status :class:`Fault` that answers every ``GET /models`` instead
            (401, 402, 429, 503…).
        chat_fault: a status :class:`Fault` that answers every chat request instead, consuming
            no script (an exhausted balance: ``Fault.status(402)``).
        router: when given, answers every chat request by its content instead of the session
            scripts (a ``ScriptLibrary``'s ``route``).
    """

    def __init__(
        self,
        sessions: Sequence[Sequence[ScriptItem]] = (),
        *,
        api_key: str | None = None,
        port: int = 0,
        strict: bool = False,
        models: Sequence[str] | None = None,
        profile: Profile = ChatSettings,
        models_fault: Fault | None = None,
        router: Router | None = None,
        chat_fault: Fault | None = None,
    ) -> None:
        for name, fault in (("models_fault", models_fault), ("chat_fault", chat_fault)):
            if fault is not None and fault.kind != "status":
                raise ValueError(f"{name} must be a Fault.status(...), got kind {fault.kind!r}")
        self.api_key = api_key
        self.strict = strict
        self.profile = resolve_profile(profile)
        self.models = default_models(self.profile) if models is None else tuple(models)
        self.models_fault = models_fault
        self.router = router
        self.chat_fault = chat_fault
        self._port = port
        self._lock = threading.Lock()
        self._player: ScriptPlayer[Response] = ScriptPlayer()
        self._calls: dict[str | None, int] = {}
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None
        for i, script in enumerate(sessions):
            self._queue(validate_script(script, path=f"sessions[{i}]"))

    @classmethod
    def from_file(
        cls, path: str | Path, *, api_key: str | None = None, port: int = 0, **options: Any
    ) -> ScriptedModelServer:
        """A server with the sessions of a JSON script file queued in order.

        ``options`` are the constructor's (``strict``, ``models``, ``models_fault``,
        ``chat_fault``).

        Raises:
            ScriptError: the file is invalid (the message names the JSON path).
        """
        return cls(load_script_file(path), api_key=api_key, port=port, **options)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind 127.0.0.1 and serve in a background thread."""
        if self._httpd is not None:
            return self
        httpd = HTTPServer(("127.0.0.1", self._port), self)
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

    def __enter__(self) -> Self:
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

    def client_env(self, api_key: str | None = None) -> dict[str, str]:
        """The environment variables that point a client of this server's profile here: its
        base URL, a key (the server's own when it requires one, else ``"scripted"``) and
        ``send_session_id``, by the profile's prefix (``OPENAI_BASE_URL``…)."""
        key = api_key if api_key is not None else (self.api_key or "scripted")
        return client_env(self.profile, self.base_url, key)

    # --- scripts -----------------------------------------------------------------------------

    def add_session(self, responses: Sequence[ScriptItem]) -> None:
        """Queue a script for the next new session id, in order of their first requests.

        Raises:
            ScriptError: a chunk is not a valid dsh chunk (the message says which).
        """
        script = validate_script(responses)
        with self._lock:
            self._queue(script)

    def set_session(self, session_id: str, responses: Sequence[ScriptItem]) -> None:
        """Bind a script to an explicit session id (replacing any script it had)."""
        script = PlayerScript(f"for {session_id}", tuple(validate_script(responses)))
        with self._lock:
            self._player.assign(session_id, script)

    def _queue(self, responses: Sequence[Response]) -> None:
        self._player.add(PlayerScript(f"#{len(self._player.scripts) + 1}", tuple(responses)))

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
            return self._player.problems()

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
            binding, response = self._player.next_entry(session_id)
            if response is None:
                return call, None, self._player.miss(binding)
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

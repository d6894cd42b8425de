"""One proxy serving many runs: each run's engine under a path of its own.

A gate that started ``dsh-llm-proxy`` per foreign run paid a fresh interpreter importing the
server (~0.3 CPU-s), the recording's load, and the server's stop, per run. A
:class:`ProxyHub` is started once per process (:func:`shared_hub`) and serves every run of it
at once: a run adds a *route* (its own replay or record engine, its own recording root) and
points its agent at the route's base URL, ``http://127.0.0.1:PORT/run/TOKEN/v1``; closing the
route removes it. The token is random (128 bits): an agent, which learns only its own base
URL, cannot reach another run's engine; a path without a live token is a 404.

The hub runs inside the gate: each route answers within its own :class:`RouteBudget`
(requests in flight, request body bytes held), so an agent cannot grow the gate without bound
(red team 4 F8); no body is read before its route is known.
"""

from __future__ import annotations

import atexit
import os
import secrets
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from dsh_core import DshError, SessionStore
from dsh_core.plugins import DEFAULT_STORE_BACKEND
from dsh_llm_proxy._app import Engine, RecordEngine, ReplayEngine, build_app, error_response
from dsh_llm_proxy._guard import LocalOnly, RouteBudget
from dsh_llm_proxy._policy import PolicyRefusal, RecordPolicy
from dsh_llm_proxy._scrub import Scrub
from dsh_llm_proxy._server import empty_recording_store, replay_engine
from dsh_llm_proxy._serving import ServingThread, loopback_socket
from dsh_llm_replay import ReplayReport

__all__ = ["ProxyHub", "ProxyRoute", "shared_hub"]

_PREFIX = "/run/"
_CALL_TIMEOUT_S = 30.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class ProxyRoute:
    """One run's engine on a :class:`ProxyHub`, until :meth:`close`."""

    def __init__(
        self,
        hub: ProxyHub,
        token: str,
        engine: Engine,
        store: SessionStore | None,
        budget: RouteBudget,
    ) -> None:
        self._hub = hub
        self.token = token
        self.engine = engine
        self.budget = budget
        """What the route holds at once (and has refused); read it for a report."""
        self._store = store
        self._closed = False

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/run/<token>/v1`` (what an OpenAI SDK takes as
        ``base_url``)."""
        return f"http://127.0.0.1:{self._hub.port}{_PREFIX}{self.token}/v1"

    def report(self) -> ReplayReport:
        """Replay: the consumption report so far, read on the hub's loop (where the engine's
        calls run).

        Raises:
            DshError: the route records.
        """
        engine = self.engine
        if not isinstance(engine, ReplayEngine):
            raise DshError("dsh-llm-proxy: only a replaying route has a consumption report")

        async def read() -> ReplayReport:
            return engine.report()

        return self._hub.serving.run(read, _CALL_TIMEOUT_S)

    def accepted(self) -> list[str]:
        """Replay with ``accept_drift``: the request differences answered anyway so far."""
        engine = self.engine
        return list(engine.accepted) if isinstance(engine, ReplayEngine) else []

    def mismatches(self) -> list[str]:
        """Replay: the requests refused so far as differing from their recorded call."""
        engine = self.engine
        return list(engine.mismatches) if isinstance(engine, ReplayEngine) else []

    def refusals(self) -> list[PolicyRefusal]:
        """Record: the calls its :class:`RecordPolicy` refused so far (none were sent
        upstream; a run with any has failed)."""
        engine = self.engine
        return engine.refusals if isinstance(engine, RecordEngine) else []

    def close(self) -> None:
        """Remove the route, finish its sessions (record: every call written) and close its
        store (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._hub.remove(self.token)
        try:
            self._hub.serving.run(self.engine.aclose, _CALL_TIMEOUT_S)
        finally:
            if self._store is not None:
                self._store.close()

    def __enter__(self) -> ProxyRoute:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ProxyHub:
    """The proxy on 127.0.0.1 serving any number of runs' routes from one background thread.

    Raises:
        OSError: no loopback port could be bound.
    """

    def __init__(self, port: int = 0) -> None:
        self._routes: dict[
            str, tuple[Callable[[Scope, Receive, Send], Awaitable[None]], RouteBudget]
        ] = {}
        self._lock = threading.Lock()
        sock = loopback_socket(port)
        self.port: int = sock.getsockname()[1]
        self.serving = ServingThread(
            LocalOnly(self._dispatch, read_body=False), sock, "dsh-llm-proxy hub", lifespan=False
        )

    def start(self) -> ProxyHub:
        """Serve; returns once the hub accepts connections.

        Raises:
            DshError: it did not start.
        """
        self.serving.start()
        return self

    def close(self) -> None:
        """Stop serving (the routes still open answer nothing more)."""
        self.serving.stop()

    def replay(
        self,
        root: Path | str,
        *,
        scrub: Scrub | None = None,
        accept_drift: bool = False,
        store: str | None = None,
    ) -> ProxyRoute:
        """A keyless route answering from the recording in ``root`` (see
        :meth:`ProxyServer.replay`, also for ``accept_drift``).

        Raises:
            DshError: the root does not exist, or holds a log that cannot be read.
        """
        return self._add(replay_engine(root, scrub, accept_drift, store), None)

    def record(
        self,
        root: Path | str,
        *,
        upstream: str,
        api_key: str,
        store: str = DEFAULT_STORE_BACKEND,
        scrub: Scrub | None = None,
        policy: RecordPolicy | None = None,
    ) -> ProxyRoute:
        """A route forwarding to ``upstream`` with ``api_key`` and writing every call into the
        empty recording root ``root`` (see :meth:`ProxyServer.record`); each call within
        ``policy`` (default: :class:`RecordPolicy`'s limits, any model) or refused.

        Raises:
            DshError: ``root`` already holds sessions.
        """
        opened = empty_recording_store(root, store)
        engine = RecordEngine(
            opened, upstream, api_key, scrub=scrub or Scrub(), policy=policy or RecordPolicy()
        )
        return self._add(engine, opened)

    def remove(self, token: str) -> None:
        """Stop routing ``token`` (a later request to it is a 404)."""
        with self._lock:
            self._routes.pop(token, None)

    def _add(self, engine: Engine, store: SessionStore | None) -> ProxyRoute:
        token = secrets.token_hex(16)
        budget = RouteBudget()
        with self._lock:
            self._routes[token] = (build_app(engine), budget)
        return ProxyRoute(self, token, engine, store, budget)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; nothing else is served
        path: str = scope["path"]
        token, slash, _ = path.removeprefix(_PREFIX).partition("/")
        route = self._routes.get(token) if path.startswith(_PREFIX) and slash else None
        if route is None:  # answered without reading the body
            response = error_response(404, f"dsh-llm-proxy: no run is served at {path}", "route")
            await response(scope, receive, send)
            return
        app, budget = route
        # The run's application sees its own paths (``/v1/chat/completions``), as Starlette's
        # Mount passes them: the prefix moves to root_path.
        prefix = f"{_PREFIX}{token}"
        scoped = {**scope, "root_path": scope.get("root_path", "") + prefix}
        await budget.serve(app, scoped, receive, send)


_shared: tuple[int, ProxyHub] | None = None
_shared_lock = threading.Lock()


def shared_hub() -> ProxyHub:
    """This process's hub, started on first use and stopped at exit (a forked child starts
    its own: the parent's serving thread does not survive a fork).

    Raises:
        DshError: it did not start.
        OSError: no loopback port could be bound.
    """
    global _shared  # noqa: PLW0603 - one hub per process is the point
    with _shared_lock:
        if _shared is None or _shared[0] != os.getpid():
            hub = ProxyHub().start()
            atexit.register(hub.close)
            _shared = (os.getpid(), hub)
        return _shared[1]

"""Running the proxy: loading a recording; serving on 127.0.0.1 in a thread or the foreground."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType

import uvicorn

from dsh_core import DshError, SessionStore
from dsh_core.plugins import DEFAULT_STORE_BACKEND, store_backend
from dsh_llm_proxy._app import (
    REPORT_PATH,
    Engine,
    RecordEngine,
    ReplayEngine,
    api_key_from_env,
    build_app,
)
from dsh_llm_proxy._book import call_inputs
from dsh_llm_proxy._defaults import upstream_defaults
from dsh_llm_proxy._policy import RecordPolicy
from dsh_llm_proxy._root import detect_store, open_recording_root
from dsh_llm_proxy._scrub import Scrub
from dsh_llm_proxy._serving import ServingThread, loopback_socket
from dsh_llm_replay import (
    ReplayHeader,
    ReplayModelClient,
    ReplayReport,
    SessionScript,
    derive_replay_script,
    recorded_headers,
)

__all__ = ["ProxyServer", "empty_recording_store", "load_recording", "replay_engine"]


@dataclass(frozen=True, slots=True)
class _Recording:
    scripts: list[SessionScript]
    models: list[str]
    inputs: dict[str, list[list[str]]]  # per script source: each call's new messages


def load_recording(
    root: Path | str, *, seed_slice: bool = True, store: str | None = None
) -> _Recording:
    """Every session of a recording root as a replay script, in binding order.

    Sessions are ordered by ``(createdAt, id)``, which is the order the proxy created them in;
    a fork child's script comes from the events after its ``seedLength`` only.

    ``store`` is the caller's own choice of backend (a server store is read only when chosen:
    :func:`detect_store`).

    Raises:
        DshError: the root does not exist; the store's and replay's errors for bad logs.
    """
    path = Path(root)
    if not path.is_dir():
        raise DshError(f"dsh-llm-proxy replay: recording root {path} does not exist")
    # Opened by the root's own backend, not through open_recording_root: a replay writes nothing.
    opened = store_backend(detect_store(path, store)).open(path)
    try:
        scripts: list[SessionScript] = []
        models: list[str] = []
        inputs: dict[str, list[list[str]]] = {}
        for header in opened.list_sessions():
            log = opened.load(header.id)
            source = f"{path}/{header.id}"
            seed = header.effective_seed_length
            events = log.events[seed:] if seed_slice else log.events
            entries = derive_replay_script(events, source)
            replay_header = ReplayHeader(header.id, header.created_at, seed, header.parent_session)
            scripts.append(
                SessionScript(
                    source,
                    replay_header,
                    tuple(entries),
                    request_headers=recorded_headers(log.events[seed:]),
                )
            )
            inputs[source] = call_inputs(events)
            for event in log.events:
                if event.type == "request/header":
                    model = event.data.get("header", {}).get("config", {}).get("model")
                    if isinstance(model, str) and model not in models:
                        models.append(model)
    finally:
        opened.close()
    return _Recording(scripts, models, inputs)


def replay_engine(
    root: Path | str,
    scrub: Scrub | None = None,
    accept_drift: bool = False,
    store: str | None = None,
) -> ReplayEngine:
    """A keyless engine answering from the recording in ``root`` (see :meth:`ProxyServer.replay`).

    Raises:
        DshError: the root does not exist; the store's and replay's errors for bad logs.
    """
    recording = load_recording(root, store=store)
    # The engine compares each call's header itself: the client never sees the request's
    # model, system prompt or tools (the wire's, not a ModelRequest's).
    client = ReplayModelClient(recording.scripts, check_headers=False)
    return ReplayEngine(client, recording.models, recording.inputs, scrub or Scrub(), accept_drift)


def empty_recording_store(root: Path | str, store: str) -> SessionStore:
    """``root`` opened by ``store`` for a new recording.

    Raises:
        DshError: it already holds sessions.
    """
    opened = open_recording_root(Path(root), store)
    existing = len(opened.list_sessions())
    if existing:
        opened.close()
        # Replay binds every session of a root in creation order: old sessions mixed with a
        # new recording would be bound first and answer the wrong calls.
        raise DshError(
            f"dsh-llm-proxy record: {root} already holds {existing} recorded sessions; "
            "record into an empty folder (or delete it first)"
        )
    return opened


def _stopped(signum: int, frame: FrameType | None) -> None:
    del signum, frame


class ProxyServer:
    """The proxy on 127.0.0.1, serving in a background thread (tests, the pytest fixture).

    Build one with :meth:`record` or :meth:`replay`; use it as a context manager.
    """

    def __init__(self, engine: Engine, store: SessionStore | None = None, port: int = 0) -> None:
        self.engine = engine
        self._store = store
        self._port = port
        self._server: uvicorn.Server | None = None
        self._serving: ServingThread | None = None
        self._socket: socket.socket | None = None

    @classmethod
    def record(
        cls,
        root: Path | str,
        *,
        store: str = DEFAULT_STORE_BACKEND,
        upstream: str | None = None,
        api_key_env: str | None = None,
        port: int = 0,
        scrub: Scrub | None = None,
        api_key: str | None = None,
        policy: RecordPolicy | None = None,
    ) -> ProxyServer:
        """A recording proxy writing into ``root``, each event through ``scrub`` first.
        ``api_key`` (else the variable ``api_key_env`` names) goes to the upstream only, on
        calls within ``policy`` (default: :class:`RecordPolicy`'s limits, any model).

        Raises:
            DshError: the key variable is not set, or ``root`` already holds sessions.
        """
        default_upstream, default_key_env = upstream_defaults()
        upstream = upstream or default_upstream
        key = api_key or api_key_from_env(api_key_env or default_key_env)
        opened = empty_recording_store(root, store)
        engine = RecordEngine(
            opened, upstream, key, scrub=scrub or Scrub(), policy=policy or RecordPolicy()
        )
        return cls(engine, opened, port)

    @classmethod
    def replay(
        cls,
        root: Path | str,
        *,
        port: int = 0,
        scrub: Scrub | None = None,
        accept_drift: bool = False,
        store: str | None = None,
    ) -> ProxyServer:
        """A keyless proxy answering from the recording in ``root``; ``scrub`` applies to both
        sides of each request comparison and puts its literals back into the answers. With
        ``accept_drift`` a changed request gets its recorded answer instead of HTTP 422 (the
        difference is kept in ``engine.accepted``). ``store`` is the caller's choice of backend:
        a recording whose marker names a server store is read from it only when chosen."""
        return cls(replay_engine(root, scrub, accept_drift, store), None, port)

    # --- lifecycle -----------------------------------------------------------------------------

    def bind(self) -> socket.socket:
        """Bind 127.0.0.1 now (so that :attr:`base_url` is known before serving)."""
        if self._socket is None:
            self._socket = loopback_socket(self._port)
        return self._socket

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (what an OpenAI SDK takes as ``base_url``)."""
        port = self.bind().getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    @property
    def report_url(self) -> str:
        """Where replay mode serves its consumption report."""
        return self.base_url.removesuffix("/v1") + REPORT_PATH

    def _uvicorn(self) -> uvicorn.Server:
        config = uvicorn.Config(
            build_app(self.engine), log_level="warning", lifespan="on", access_log=False
        )
        self._server = uvicorn.Server(config)
        return self._server

    def serve_forever(self, ready: Callable[[], None] | None = None) -> None:
        """Serve in this thread until SIGINT / SIGTERM (the CLI).

        Args:
            ready: called once the server accepts connections and handles the signals (so
                that a parent that stops it right after hearing of it is not too early).
        """
        server = self._uvicorn()

        async def serve() -> None:
            task = asyncio.create_task(server.serve(sockets=[self.bind()]))
            while not server.started and not task.done():  # noqa: ASYNC110 - uvicorn has a flag, no event
                await asyncio.sleep(0.01)
            if server.started and ready is not None:
                ready()
            await task

        # uvicorn handles SIGINT / SIGTERM itself, then re-raises them to the handlers it found
        # installed; inert ones let this function return and report the exit status.
        previous = {s: signal.signal(s, _stopped) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            asyncio.run(serve())
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self._close_store()

    def start(self) -> ProxyServer:
        """Serve in a background thread; returns once the server accepts connections.

        Raises:
            DshError: the server did not start.
        """
        if self._serving is not None:
            return self
        serving = ServingThread(build_app(self.engine), self.bind(), "dsh-llm-proxy", lifespan=True)
        serving.start()
        self._serving = serving
        return self

    def close(self) -> None:
        """Stop serving (promptly: see ``_serving``) and close the store."""
        if self._serving is not None:
            self._serving.stop()
            self._serving = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self._close_store()

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- replay consumption ----------------------------------------------------------------------

    def report(self) -> ReplayReport:
        """Replay mode: the consumption report (``ok``, ``problems``, bindings).

        Raises:
            DshError: the proxy is recording.
        """
        if not isinstance(self.engine, ReplayEngine):
            raise DshError("dsh-llm-proxy: only a replaying proxy has a consumption report")
        return self.engine.report()

    def problems(self) -> list[str]:
        """Replay mode: what was not consumed exactly (empty when recording)."""
        if isinstance(self.engine, ReplayEngine):
            return list(self.engine.report().problems)
        return []

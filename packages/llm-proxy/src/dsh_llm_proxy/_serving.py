"""An ASGI application served by uvicorn on a bound socket, in a background thread.

uvicorn's own ``serve`` wakes every 0.1 s to look at ``should_exit`` and sleeps another 0.1 s
in its shutdown: 100-200 ms of idle wall time each time a server stops, which a proxy started
and stopped per run paid per run. Here the loop waits on an event instead, and the shutdown
polls only while a connection is still answering, so :meth:`ServingThread.stop` returns as soon
as the in-flight answers are out.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import uvicorn

from dsh_core import DshError

__all__ = ["ServingThread", "loopback_socket"]

_GRACE_S = 10.0
"""How long a stop waits for answers in flight before cancelling them."""
_POLL_S = 0.002
_TICK_S = 1.0
"""How often the ``Date`` header is renewed (uvicorn's main loop does it once a second)."""

Asgi = Callable[..., Awaitable[None]]
T = TypeVar("T")


def loopback_socket(port: int = 0) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (``port`` 0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


class ServingThread:
    """Serve ``app`` on ``sock`` in a daemon thread between :meth:`start` and :meth:`stop`.

    Args:
        app: the ASGI application.
        sock: a bound, listening socket (closed by :meth:`stop`).
        name: the thread's name, and how errors name the server.
        lifespan: whether the application gets ASGI lifespan events.
    """

    def __init__(self, app: Asgi, sock: socket.socket, name: str, *, lifespan: bool) -> None:
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on" if lifespan else "off", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._sock = sock
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def start(self) -> None:
        """Serve; returns once the server accepts connections.

        Raises:
            DshError: the server did not start (the cause in the message).
        """
        self._thread.start()
        self._ready.wait()
        if self._loop is None or self._error is not None:
            self._thread.join()
            raise DshError(f"{self._name}: the server did not start: {self._error!r}")

    def stop(self) -> None:
        """Stop accepting, let answers in flight finish, shut the application down, close the
        socket (idempotent)."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop has just closed by itself
                loop.call_soon_threadsafe(stop.set)
            self._thread.join()
        self._sock.close()

    def run(self, coroutine: Callable[[], Coroutine[Any, Any, T]], timeout: float) -> T:
        """Run ``coroutine()`` on the server's loop (the thread its engines live on) and wait.

        Raises:
            DshError: the server is not running.
        """
        loop = self._loop
        if loop is None or not self._thread.is_alive():
            raise DshError(f"{self._name}: the server is not running")
        return asyncio.run_coroutine_threadsafe(coroutine(), loop).result(timeout)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # uvicorn exits with SystemExit on a failed start
            self._error = exc
        finally:
            self._ready.set()  # a start that failed wakes start() too

    async def _serve(self) -> None:
        server = self._server
        config = server.config
        if not config.loaded:
            config.load()
        server.lifespan = config.lifespan_class(config)
        stop = asyncio.Event()
        await server.startup(sockets=[self._sock])
        self._stop, self._loop = stop, asyncio.get_running_loop()
        self._ready.set()
        ticker = asyncio.create_task(self._tick())
        try:
            await stop.wait()
        finally:
            ticker.cancel()
            await self._shutdown()

    async def _tick(self) -> None:
        while True:
            await self._server.on_tick(0)
            await asyncio.sleep(_TICK_S)

    async def _shutdown(self) -> None:
        server, state = self._server, self._server.server_state
        for listener in server.servers:
            listener.close()
        # An idle keep-alive connection closes at once; one answering finishes its answer.
        for connection in list(state.connections):
            connection.shutdown()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _GRACE_S
        # uvicorn signals no event when its last connection closes: poll, finely, only while
        # one is still open.
        while (state.connections or state.tasks) and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(_POLL_S)
        for task in list(state.tasks):
            task.cancel()
        for listener in server.servers:
            await listener.wait_closed()
        await server.lifespan.shutdown()

"""``connect_attempts``: which addresses the process's sockets try to reach in a block."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Generator
from typing import Any

__all__ = ["connect_attempts"]


@contextlib.contextmanager
def connect_attempts() -> Generator[list[Any]]:
    """Yield a list that collects the address of every ``socket.connect`` of this process inside
    the block (asyncio and httpx connect through it too), the attempt made as before.

    A test of the live-call guard asserts it stays empty: a refusal after a connection attempt
    has already let the request (or a probe of the host) leave the machine.
    """
    seen: list[Any] = []
    original = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> None:
        seen.append(address)
        original(sock, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        socket.socket.connect = original  # type: ignore[method-assign]

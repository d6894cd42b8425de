"""The stdio message transport under ``acp.connection.Connection``.

``acp``'s own stdio transport reports end-of-input at once, after which the connection refuses
to send notifications — but a turn still running when stdin closes must finish and stream its
updates. This transport holds end-of-input back until every request received has been answered,
and writes frames the way the upstream agent did (compact, UTF-8, one per line).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any, cast

from acp.stdio import stdio_streams

__all__ = ["FrameTransport", "open_stdio", "protect_stdout"]

_log = logging.getLogger("dsh_acp_agent")

STDIO_LIMIT = 50 * 1024 * 1024


def dumps_frame(message: dict[str, Any]) -> bytes:
    """One JSON-RPC frame as it goes on the wire."""
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class FrameTransport:
    """Newline-delimited JSON-RPC over asyncio streams (an ``acp`` ``Transport``).

    ``receive`` returns ``None`` at end of input only once no received request is still
    unanswered, so in-flight turns finish with their updates delivered.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._write_lock = asyncio.Lock()
        self._unanswered: set[Any] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.at_eof = False

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame (frames never interleave)."""
        data = dumps_frame(message)
        async with self._write_lock:
            self._writer.write(data)
            await self._writer.drain()
        if "method" not in message and "id" in message:
            self._answered(message.get("id"))

    async def receive(self) -> dict[str, Any] | None:
        """The next message; ``None`` at end of input once every request is answered."""
        while True:
            try:
                line = await self._reader.readline()
            except ValueError:
                # Over the line limit: the frame is lost, but later ones are still readable.
                _log.error("dropped an input frame longer than %d bytes", STDIO_LIMIT)
                continue
            if not line:
                self.at_eof = True
                await self._idle.wait()
                return None
            if not line.strip():
                continue
            try:
                decoded: Any = json.loads(line)
            except ValueError:
                await self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": -32700, "message": "Parse error"},
                    }
                )
                continue
            if not isinstance(decoded, dict):
                await self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": -32600, "message": "Invalid request"},
                    }
                )
                continue
            message = cast(dict[str, Any], decoded)
            if "method" in message and "id" in message:
                self._unanswered.add(_key(message.get("id")))
                self._idle.clear()
            return message

    async def close(self) -> None:
        """Flush and close the output stream."""
        async with self._write_lock:
            try:
                await self._writer.drain()
            finally:
                self._writer.close()

    def _answered(self, request_id: Any) -> None:
        self._unanswered.discard(_key(request_id))
        if not self._unanswered:
            self._idle.set()


def _key(request_id: Any) -> Any:
    # Ids are strings or numbers by the spec; anything else is keyed by its JSON text.
    return request_id if isinstance(request_id, str | int | float) else json.dumps(request_id)


def protect_stdout() -> int:
    """Reserve the real stdout for JSON-RPC frames; return its new file descriptor.

    File descriptor 1 is pointed at stderr afterwards, so a stray ``print`` or a child
    process that inherits stdout cannot corrupt the frame stream.
    """
    sys.stdout.flush()
    rpc_fd = os.dup(1)
    os.dup2(2, 1)
    return rpc_fd


async def open_stdio(rpc_fd: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """asyncio streams on stdin and ``rpc_fd``, set up by ``acp.stdio.stdio_streams``."""
    saved = sys.stdout
    rpc_out = os.fdopen(rpc_fd, "w", encoding="utf-8", closefd=False)
    sys.stdout = rpc_out  # stdio_streams connects whatever sys.stdout is
    try:
        return await stdio_streams(limit=STDIO_LIMIT)
    finally:
        sys.stdout = saved

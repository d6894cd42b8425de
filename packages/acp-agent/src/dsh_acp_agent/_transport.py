"""The stdio message transport under ``acp.connection.Connection``.

``acp``'s own stdio transport reports end-of-input at once, after which the connection refuses
to send notifications — but a turn still running when stdin closes must finish and stream its
updates. This transport holds end-of-input back until every request received has been answered,
and writes frames the way the upstream agent did (compact, UTF-8, one per line). Reading and
writing happen on worker threads, so stdin and stdout may be pipes, terminals or regular files.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from dsh_core import loads_bounded

__all__ = ["FrameTransport", "StdinFeed", "dumps_frame", "protect_stdout"]

_log = logging.getLogger("dsh_acp_agent")

STDIO_LIMIT = 50 * 1024 * 1024


def dumps_frame(message: dict[str, Any]) -> bytes:
    """One JSON-RPC frame as it goes on the wire."""
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class FrameTransport:
    """Newline-delimited JSON-RPC on stdin and a stdout descriptor (an ``acp`` ``Transport``).

    ``receive`` returns ``None`` at end of input only once no received request is still
    unanswered, so in-flight turns finish with their updates delivered. A line longer than
    ``line_limit`` (the reader's limit) is answered with one ``-32600`` error and skipped
    through its newline.
    """

    def __init__(
        self, reader: asyncio.StreamReader, out_fd: int, line_limit: int = STDIO_LIMIT
    ) -> None:
        self._reader = reader
        self._line_limit = line_limit
        self._out_fd = out_fd
        # One writer thread: frames reach stdout in the order they were sent.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dsh-acp-stdout")
        self._unanswered: set[Any] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.at_eof = False

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame (frames never interleave)."""
        data = dumps_frame(message)
        await asyncio.get_running_loop().run_in_executor(
            self._writer, _write_all, self._out_fd, data
        )
        if "method" not in message and "id" in message:
            self._answered(message.get("id"))

    async def receive(self) -> dict[str, Any] | None:
        """The next message; ``None`` at end of input once every request is answered."""
        while True:
            line = await self._read_line()
            if line is None:
                _log.error("dropped an input line longer than %d bytes", self._line_limit)
                await self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {
                            "code": -32600,
                            "message": f"Invalid request: line longer than {self._line_limit} "
                            f"bytes, dropped up to the next newline",
                        },
                    }
                )
                continue
            if not line:
                self.at_eof = True
                await self._idle.wait()
                return None
            if not line.strip():
                continue
            try:
                # Bounded: a 100,000-deep line is a parse error, not a crash of the agent.
                decoded: Any = loads_bounded(line)
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

    async def _read_line(self) -> bytes | None:
        """The next line (``b""`` at end of input), or ``None`` for a line over the limit.

        An over-long line is consumed through its newline, however long it runs on: its tail
        must never be read as a frame of its own.
        """
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:
            return end.partial  # the last line had no newline (or the input was empty)
        except asyncio.LimitOverrunError as over:
            skip = over.consumed
        while True:
            try:
                await self._reader.readexactly(skip)
                await self._reader.readuntil(b"\n")
                return None
            except asyncio.IncompleteReadError:
                return None  # the input ended inside the over-long line
            except asyncio.LimitOverrunError as over:
                skip = over.consumed

    async def close(self) -> None:
        """Wait for the frames already sent to be written; stop the writer thread."""
        await asyncio.get_running_loop().run_in_executor(None, self._writer.shutdown)

    def _answered(self, request_id: Any) -> None:
        self._unanswered.discard(_key(request_id))
        if not self._unanswered:
            self._idle.set()


def _key(request_id: Any) -> Any:
    # Ids are strings or numbers by the spec; anything else is keyed by its JSON text.
    return request_id if isinstance(request_id, str | int | float) else json.dumps(request_id)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def protect_stdout() -> int:
    """Reserve the real stdout for JSON-RPC frames; return its new file descriptor.

    File descriptor 1 is pointed at stderr afterwards, so a stray ``print`` or a child
    process that inherits stdout cannot corrupt the frame stream.
    """
    sys.stdout.flush()
    rpc_fd = os.dup(1)
    os.dup2(2, 1)
    return rpc_fd


class StdinFeed:
    """Feeds stdin into an asyncio stream reader from a daemon thread (any kind of stdin).

    Attributes:
        reader: the stream the frames are read from.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.reader = asyncio.StreamReader(limit=STDIO_LIMIT, loop=loop)
        self._ended = False
        threading.Thread(target=self._feed, name="dsh-acp-stdin", daemon=True).start()

    def end(self) -> None:
        """End the input now, as if stdin had closed (call on the loop's thread)."""
        if not self._ended:
            self._ended = True
            self.reader.feed_eof()

    def _data(self, data: bytes) -> None:
        if not self._ended:
            self.reader.feed_data(data)

    def _feed(self) -> None:
        try:
            while data := os.read(0, 65536):
                self._loop.call_soon_threadsafe(self._data, data)
        except OSError as exc:
            _log.error("reading stdin failed: %s", exc)
        finally:
            self._loop.call_soon_threadsafe(self.end)

"""What the scripted server sends instead of a plain chunk list: faults and pauses.

A :class:`Fault` takes the place of one response (an HTTP error status, a dropped connection,
a slow first byte, an empty completion, raw SSE text); a :class:`Pause` inside a chunk list
holds the stream until the test releases it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dsh_core import Chunk

__all__ = ["Fault", "Pause"]


class Pause:
    """A marker inside a chunk list: the server stops there until :meth:`release` is called.

    Lets a test observe a chunk on the client while the server provably has not sent the rest.
    Closing the server releases every pause.
    """

    def __init__(self) -> None:
        self._reached = threading.Event()
        self._released = threading.Event()

    @property
    def reached(self) -> bool:
        """Whether the server has flushed everything before the pause and is waiting."""
        return self._reached.is_set()

    @property
    def released(self) -> bool:
        """Whether :meth:`release` has been called."""
        return self._released.is_set()

    def release(self) -> None:
        """Let the server send the rest of the response."""
        self._released.set()

    def wait_reached(self, timeout: float | None = None) -> bool:
        """Block until the server reaches the pause; ``False`` on timeout."""
        return self._reached.wait(timeout)

    def __repr__(self) -> str:
        return f"Pause(reached={self.reached}, released={self.released})"


@dataclass(frozen=True, slots=True)
class Fault:
    """A scripted failure; it takes the place of one response in a session's script.

    Build one with :meth:`status`, :meth:`drop_after` or :meth:`slow_first_byte`.
    """

    kind: Literal["status", "drop-after", "slow-first-byte", "empty", "raw"]
    status_code: int = 200
    retry_after: float | None = None
    message: str | None = None
    body: str | None = None
    after: int = 0
    seconds: float = 0.0
    chunks: tuple[Chunk, ...] = ()
    parts: tuple[str | float, ...] = ()

    @classmethod
    def status(
        cls,
        status: int,
        *,
        retry_after: float | None = None,
        message: str | None = None,
        body: str | None = None,
    ) -> Fault:
        """Answer with HTTP ``status`` and an OpenAI-style JSON error body.

        Args:
            status: the HTTP status (4xx or 5xx).
            retry_after: seconds sent as the ``Retry-After`` header.
            message: ``error.message`` of the body (a default names the status).
            body: send this text as the whole body instead (an HTML page from a proxy, …);
                ``text/html`` when it starts with ``<``, else ``text/plain``.
        """
        if not 400 <= status <= 599:
            raise ValueError(f"Fault.status needs a 4xx or 5xx status, got {status}")
        if message is not None and body is not None:
            raise ValueError("Fault.status takes a message or a body, not both")
        return cls(
            "status", status_code=status, retry_after=retry_after, message=message, body=body
        )

    @classmethod
    def raw(cls, parts: Sequence[str | float]) -> Fault:
        """Answer 200 ``text/event-stream`` and write ``parts`` as they are: each string is
        sent (SSE text: ``"data: …\\n\\n"``, ``": keep-alive\\n\\n"``), each number is a
        pause in seconds. For what chunks cannot express: keep-alive comments, error events,
        a ``finish_reason`` such as ``content_filter``."""
        for part in parts:
            if not isinstance(part, str) and (isinstance(part, bool) or part < 0):
                raise ValueError(f"Fault.raw pauses must be seconds >= 0, got {part!r}")
        return cls("raw", parts=tuple(parts))

    @classmethod
    def empty(cls) -> Fault:
        """Stream a completion that opens no content block: ``finish_reason: stop``, usage."""
        return cls("empty")

    @classmethod
    def drop_after(cls, n_chunks: int, chunks: Sequence[Chunk] | None = None) -> Fault:
        """Stream ``chunks``, then close the connection after ``n_chunks`` SSE data events.

        Each delta, and the finish (with its usage), is one event; ``block-start`` and
        ``block-end`` send none. Without ``chunks`` a text block of ``n_chunks + 1`` deltas
        is streamed, so the drop always cuts it short.
        """
        if n_chunks < 0:
            raise ValueError(f"Fault.drop_after needs n_chunks >= 0, got {n_chunks}")
        body = tuple(chunks) if chunks is not None else _filler(n_chunks + 1)
        return cls("drop-after", after=n_chunks, chunks=body)

    @classmethod
    def slow_first_byte(cls, seconds: float, chunks: Sequence[Chunk] | None = None) -> Fault:
        """Wait ``seconds`` before the status line, then stream ``chunks`` (a short text)."""
        if seconds < 0:
            raise ValueError(f"Fault.slow_first_byte needs seconds >= 0, got {seconds}")
        body = tuple(chunks) if chunks is not None else _filler(1, finish=True)
        return cls("slow-first-byte", seconds=seconds, chunks=body)


def _filler(deltas: int, *, finish: bool = False) -> tuple[Chunk, ...]:
    parts = [f"part{k} " for k in range(deltas)]
    out: list[Chunk] = [{"type": "block-start", "index": 0, "blockType": "text"}]
    out.extend({"type": "text-delta", "index": 0, "text": p} for p in parts)
    if finish:
        out.append(
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(parts)}}
        )
        out.append({"type": "finish", "reason": {"kind": "stop"}})
    return tuple(out)

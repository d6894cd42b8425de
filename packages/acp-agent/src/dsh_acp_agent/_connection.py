"""The agent's JSON-RPC connection: requests in, answers and notifications out.

This is the agent side of ``acp.connection.Connection`` (agent-client-protocol 0.12), kept to
what an agent that sends no requests of its own needs, so that starting the agent does not
import the ``acp`` package (its ``__init__`` imports the whole pydantic schema, ~0.4 s of a
cold start). Every answer is framed as ``acp``'s connection frames it: a result, a
``ProtocolError``'s error object, ``-32602`` with pydantic's errors for invalid params, or
``-32603`` with the exception's details for anything unexpected.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any, Protocol

from pydantic import ValidationError

__all__ = ["MethodHandler", "MessageTransport", "ProtocolError", "RpcConnection"]

_log = logging.getLogger("dsh_acp_agent")

MethodHandler = Callable[[Any, Any, bool], Awaitable[Any]]
"""``(method, params, is_notification)`` → the result (a request's) or ``None``."""


class MessageTransport(Protocol):
    """Decoded JSON-RPC messages in and out (``FrameTransport`` on stdio)."""

    async def send(self, message: dict[str, Any]) -> None: ...

    async def receive(self) -> dict[str, Any] | None: ...

    async def close(self) -> None: ...


class ProtocolError(Exception):
    """A JSON-RPC error answer; its frame omits ``data`` when there is none (upstream's shape).

    Args:
        code: the JSON-RPC error code (``-32602`` invalid params, ``-32603`` internal error…).
        message: the error's message.
        data: extra detail for the client, if any.
    """

    def __init__(self, code: int, message: str, data: Any | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data

    def to_error_obj(self) -> dict[str, Any]:
        """The ``error`` member of the answer frame."""
        obj: dict[str, Any] = {"code": self.code, "message": str(self)}
        if self.data is not None:
            obj["data"] = self.data
        return obj


def invalid_params(exc: ValidationError) -> dict[str, Any]:
    """The error object ``acp`` answers a request whose params fail its schema with."""
    return {"code": -32602, "message": "Invalid params", "data": {"errors": exc.errors()}}


class RpcConnection:
    """Serves JSON-RPC requests and notifications from ``transport`` through ``handler``.

    Each incoming request or notification runs in its own task, started in arrival order (as
    ``acp`` does), so a long ``session/prompt`` never blocks a ``session/cancel``.
    """

    def __init__(self, handler: MethodHandler, transport: MessageTransport) -> None:
        self._handler = handler
        self._transport = transport
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._disconnected = False

    async def main_loop(self) -> None:
        """Read and dispatch messages until the transport's input ends."""
        try:
            while (message := await self._transport.receive()) is not None:
                self._dispatch(message)
        except asyncio.CancelledError:
            return
        except Exception:
            _log.exception("the connection's receive loop failed")
            self._disconnected = True
            raise
        self._disconnected = True

    async def send_notification(self, method: str, params: Any | None = None) -> None:
        """Send one notification.

        Raises:
            ConnectionError: the input has ended or the connection is closed.
        """
        if self._disconnected or self._closed:
            raise ConnectionError("Connection closed")
        await self._transport.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def close(self) -> None:
        """Close the transport, then cancel and await every handler still running."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._transport.close()
        finally:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with suppress(asyncio.CancelledError):
                    await task

    def _dispatch(self, message: dict[str, Any]) -> None:
        if message.get("method") is None:
            return  # a response: this agent sends no requests, so none is awaited
        work = self._request(message) if "id" in message else self._notification(message)
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            _log.error("a request task failed", exc_info=exc)

    async def _request(self, message: dict[str, Any]) -> None:
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        method = message["method"]
        try:
            answer["result"] = await self._handler(method, message.get("params"), False)
        except ProtocolError as exc:
            answer["error"] = exc.to_error_obj()
        except ValidationError as exc:
            answer["error"] = invalid_params(exc)
        except Exception as exc:
            _log.exception("unhandled error while handling request method=%s", method)
            answer["error"] = {"code": -32603, "message": "Internal error", "data": _details(exc)}
        await self._transport.send(answer)

    async def _notification(self, message: dict[str, Any]) -> None:
        method = message["method"]
        try:
            await self._handler(method, message.get("params"), True)
        except (ProtocolError, ValidationError) as exc:
            # JSON-RPC answers no notification; a newer client's are expected and harmless.
            reason = "unknown method" if isinstance(exc, ProtocolError) else "invalid params"
            _log.info("ignored notification %s: %s", method, reason)
        except Exception:
            _log.exception("unhandled error while handling notification method=%s", method)


def _details(exc: Exception) -> Any:
    """An unexpected error's ``data``: its text parsed as JSON if it is JSON (as ``acp``)."""
    try:
        return json.loads(str(exc))
    except ValueError:
        return {"details": str(exc)}

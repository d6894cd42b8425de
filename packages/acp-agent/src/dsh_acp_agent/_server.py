"""The ACP method handlers: sessions from the store, turns from the agent, updates out."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Protocol, cast

from dsh_acp_agent._connection import MessageTransport, ProtocolError, RpcConnection
from dsh_acp_agent._requests import RequestDispatcher
from dsh_acp_agent._updates import JsonObject, UpdateMapper, replay_updates
from dsh_core import (
    Agent,
    CreateOptions,
    DshError,
    Event,
    Session,
    SessionBusyError,
    SessionIdError,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    TurnOutcome,
)

if TYPE_CHECKING:
    from acp.router import MessageRouter

__all__ = ["AGENT_NAME", "AcpServer", "ProtocolError", "build_router", "package_version"]

_log = logging.getLogger("dsh_acp_agent")

AGENT_NAME = "dsh-acp-agent"
PROTOCOL_VERSION = 1

SESSION_UPDATE = "session/update"

_STOP_REASONS = {"completed": "end_turn", "aborted": "cancelled", "max-tokens": "max_tokens"}


@functools.cache
def package_version() -> str:
    """The installed ``dsh-acp-agent`` distribution's version (read once: the metadata lookup
    and its email parser cost a few ms, and a warm fork server reads it before it forks)."""
    try:
        return version("dsh-acp-agent")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0"


class Notifier(Protocol):
    """Where ``session/update`` notifications go (the JSON-RPC connection)."""

    async def send_notification(self, method: str, params: Any | None = None) -> None: ...


@dataclass
class _LiveSession:
    session: Session
    turn: asyncio.Task[TurnOutcome] | None = None
    turn_started: bool = False
    cancel_pending: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class _UpdatePump:
    """Turns the agent's synchronous listener calls into ordered, awaited notifications."""

    def __init__(self, notifier: Notifier, session_id: str) -> None:
        self._notifier = notifier
        self._session_id = session_id
        self._mapper = UpdateMapper()
        self._queue: asyncio.Queue[JsonObject | None] = asyncio.Queue()
        self._task = asyncio.create_task(self._drain(), name=f"dsh-acp-updates-{session_id}")

    def listener(self, event: Event) -> None:
        for update in self._mapper.updates_for(event):
            self._queue.put_nowait(update)

    async def finish(self) -> None:
        """Wait until every queued update has been written."""
        self._queue.put_nowait(None)
        await self._task

    async def _drain(self) -> None:
        method = SESSION_UPDATE
        while (update := await self._queue.get()) is not None:
            try:
                await self._notifier.send_notification(
                    method, {"sessionId": self._session_id, "update": update}
                )
            except ConnectionError:
                # The client is gone; the turn still runs to its end and is logged.
                _log.warning("dropped a session/update: the connection is closed")


class AcpServer:
    """Serves ``initialize``, ``session/new|load|prompt|cancel`` for one client.

    Args:
        agent: runs the turns; its store holds every session.
        notifier: the connection updates are sent on (set with :meth:`bind` when the
            connection is built after the server).
    """

    def __init__(self, agent: Agent, notifier: Notifier | None = None) -> None:
        self.agent = agent
        self._notifier = notifier
        self._sessions: dict[str, _LiveSession] = {}

    @property
    def store(self) -> SessionStore:
        return self.agent.store

    def bind(self, notifier: Notifier) -> None:
        """Attach the connection notifications go out on."""
        self._notifier = notifier

    def _notify_target(self) -> Notifier:
        if self._notifier is None:
            raise RuntimeError("AcpServer.bind() was not called before serving")
        return self._notifier

    # --- handlers (called by acp's router with the request's fields as keywords) ----------

    async def initialize(self, **_: Any) -> JsonObject:
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentInfo": {"name": AGENT_NAME, "version": package_version()},
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
            },
            "authMethods": [],
        }

    async def new_session(
        self,
        cwd: str,
        additional_directories: Sequence[str] | None = None,
        mcp_servers: Sequence[Any] | None = None,
        **_: Any,
    ) -> JsonObject:
        # Upstream's validateWorkspaceParams / validateSessionParams, in its order and with
        # its texts (June's say "in this MVP"), before anything is created.
        suffix = " in this MVP" if self.agent.config.profile == "june" else ""
        if not os.path.isabs(cwd):
            raise ProtocolError(-32602, f"Invalid params: cwd must be an absolute path: {cwd}")
        if additional_directories:
            raise ProtocolError(
                -32602, f"Invalid params: additionalDirectories is not supported{suffix}"
            )
        if mcp_servers:
            raise ProtocolError(-32602, f"Invalid params: mcpServers is not supported{suffix}")
        if not os.path.isdir(cwd):  # noqa: ASYNC240 (one stat)
            # Ours only: upstream would create the session and fail at the first tool call.
            raise ProtocolError(
                -32602,
                f"Invalid params: cwd must be an absolute path to an existing directory, "
                f"got {cwd!r}",
            )
        try:
            # Head writes delegationDepth 0 on a top-level header and its reader requires it;
            # June wrote none, so its profile keeps the key absent.
            depth = 0 if self.agent.config.behaviour.top_level_depth else None
            meta = SessionMeta(cwd=cwd, delegation_depth=depth)
            session = self.store.create(CreateOptions(meta=meta))
        except DshError as exc:
            raise ProtocolError(-32603, f"Internal error: cannot create a session: {exc}") from exc
        self._sessions[session.id] = _LiveSession(session)
        return {"sessionId": session.id}

    async def load_session(self, session_id: str, **_: Any) -> JsonObject:
        live = self._sessions.get(session_id)
        if live is None:
            try:
                session = self.store.resume(session_id)
            except SessionNotFoundError:
                raise _unknown_session(session_id) from None
            except SessionIdError as exc:
                raise ProtocolError(
                    -32602, f"Invalid params: {exc}", {"sessionId": session_id}
                ) from None
            except SessionBusyError as exc:
                raise ProtocolError(
                    -32603,
                    f"Internal error: session {session_id} is open in another process: {exc}",
                ) from exc
            except DshError as exc:
                raise ProtocolError(
                    -32603, f"Internal error: cannot load session {session_id}: {exc}"
                ) from exc
            live = _LiveSession(session)
            self._sessions[session_id] = live
        notifier = self._notify_target()
        method = SESSION_UPDATE
        async with live.lock:
            for update in replay_updates(live.session.events):
                await notifier.send_notification(
                    method, {"sessionId": session_id, "update": update}
                )
        return {}

    async def prompt(self, session_id: str, prompt: Sequence[Any], **_: Any) -> JsonObject:
        live = self._sessions.get(session_id)
        if live is None:
            raise _unknown_session(session_id)
        if live.turn is not None:
            raise ProtocolError(
                -32602, f"Invalid params: session {session_id} is already running a prompt"
            )
        text = "".join(_block_text(block) for block in prompt)
        async with live.lock:
            outcome = await self._run_turn(live, text)
        if outcome.kind == "error" or outcome.kind not in _STOP_REASONS:
            message = outcome.error.message if outcome.error is not None else outcome.kind
            raise ProtocolError(-32603, f"Internal error: turn failed: {message}")
        if outcome.kind == "max-tokens":
            return {"stopReason": self.agent.config.behaviour.max_tokens_stop_reason}
        return {"stopReason": _STOP_REASONS[outcome.kind]}

    async def cancel(self, session_id: str, **_: Any) -> None:
        live = self._sessions.get(session_id)
        if live is not None:
            _cancel_turn(live)

    # --- turns and shutdown ---------------------------------------------------------------

    async def _run_turn(self, live: _LiveSession, text: str) -> TurnOutcome:
        pump = _UpdatePump(self._notify_target(), live.session.id)
        live.turn_started = live.cancel_pending = False
        task = asyncio.create_task(self._turn(live, text, pump))
        live.turn = task
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            # The request itself is being torn down (shutdown): end the turn cleanly first.
            task.cancel()
            await asyncio.wait({task})
            raise
        finally:
            live.turn = None
            await pump.finish()
        if task.cancelled():
            # The agent consumes a cancellation and returns "aborted"; a task cancelled for
            # shutdown before it ran ends up here.
            return TurnOutcome(turn=0, kind="aborted", final_text="")
        exc = task.exception()
        if exc is not None:
            _log.error("turn failed in session %s", live.session.id, exc_info=exc)
            raise ProtocolError(-32603, f"Internal error: turn failed: {exc}") from exc
        return task.result()

    async def _turn(self, live: _LiveSession, text: str, pump: _UpdatePump) -> TurnOutcome:
        live.turn_started = True
        if live.cancel_pending:
            # Cancelled before this task first ran: cancel now, so the agent has logged the
            # turn's start and closes it as aborted at its first suspension point.
            current = asyncio.current_task()
            if current is not None:
                current.cancel()
        return await self.agent.run_turn(live.session, text, listener=pump.listener)

    def cancel_all(self) -> None:
        """Cancel every running turn (each is logged as aborted)."""
        for live in self._sessions.values():
            _cancel_turn(live)

    def close(self) -> None:
        """Flush and close every open session, then the store. Errors are logged, not raised."""
        for session_id, live in list(self._sessions.items()):
            try:
                live.session.close()
            except Exception:
                _log.exception("closing session %s failed", session_id)
        self._sessions.clear()
        self.store.close()


def _cancel_turn(live: _LiveSession) -> None:
    if live.turn is None:
        return
    if live.turn_started:
        live.turn.cancel()
    else:
        # A task cancelled before it starts never runs, and its turn would go unlogged.
        live.cancel_pending = True


def _block_text(block: Any) -> str:
    """A prompt block's text, or ``""`` for other kinds: a plain request's blocks are dicts,
    those ``acp``'s router validated are ``acp.schema`` models."""
    if isinstance(block, dict):
        fields = cast(dict[str, Any], block)
        return str(fields.get("text", "")) if fields.get("type") == "text" else ""
    return str(getattr(block, "text", "")) if getattr(block, "type", None) == "text" else ""


def _unknown_session(session_id: str) -> ProtocolError:
    return ProtocolError(
        -32602, f"Invalid params: unknown session {session_id}", {"sessionId": session_id}
    )


def build_router(server: AcpServer) -> MessageRouter:
    """``acp``'s router with the methods this agent serves bound to ``server``.

    The connection routes plain requests itself and only the rest through this router, so
    building it (and importing ``acp``'s schema) happens at the first request that needs it.
    """
    from acp.meta import AGENT_METHODS  # noqa: PLC0415 (imports the whole acp schema)
    from acp.router import MessageRouter  # noqa: PLC0415
    from acp.schema import (  # noqa: PLC0415
        CancelNotification,
        InitializeRequest,
        LoadSessionRequest,
        NewSessionRequest,
        PromptRequest,
    )

    router = MessageRouter()
    router.route_request(AGENT_METHODS["initialize"], InitializeRequest, server, "initialize")
    router.route_request(AGENT_METHODS["session_new"], NewSessionRequest, server, "new_session")
    router.route_request(AGENT_METHODS["session_load"], LoadSessionRequest, server, "load_session")
    router.route_request(AGENT_METHODS["session_prompt"], PromptRequest, server, "prompt")
    router.route_notification(AGENT_METHODS["session_cancel"], CancelNotification, server, "cancel")
    return router


def connect(server: AcpServer, transport: MessageTransport) -> RpcConnection:
    """The connection serving ``server`` over ``transport`` (not yet listening)."""
    conn = RpcConnection(RequestDispatcher(server, lambda: build_router(server)), transport)
    server.bind(conn)
    return conn

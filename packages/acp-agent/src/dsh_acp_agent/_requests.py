"""Routing the five methods this agent serves, with the ``acp`` schema loaded only when needed.

Importing ``acp`` costs ~0.4 s (its package imports every pydantic model of the protocol), and
a run's requests are nearly always plain: ``initialize`` with a version, ``session/new`` without
MCP servers, one text block per prompt. Each plain request is checked here against a strict
subset of its ``acp.schema`` model — params that pass are valid under that model too, and the
handler receives the fields it reads exactly as ``acp``'s router would pass them. Anything else
(an unknown method, snake_case or ``_meta`` keys, MCP servers, non-text blocks, a wrong type)
goes to ``acp``'s own router, imported on first use, so its answers and validation errors are
``acp``'s to the byte.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from dsh_acp_agent._connection import MethodHandler, ProtocolError

if TYPE_CHECKING:
    from acp.router import MessageRouter

__all__ = ["RequestDispatcher", "plain_params"]

Kwargs = dict[str, Any]

_MAX_PROTOCOL_VERSION = 65535  # InitializeRequest.protocol_version: le=65535


def _fields(params: Any, allowed: frozenset[str], required: frozenset[str]) -> Kwargs | None:
    """``params`` when it is an object holding only ``allowed`` keys and every ``required``."""
    if not isinstance(params, dict):
        return None
    fields = cast(Kwargs, params)
    keys = fields.keys()
    return fields if keys <= allowed and required <= keys else None


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in cast(list[Any], value))


def _directories(fields: Kwargs) -> tuple[bool, list[str] | None]:
    """Whether ``additionalDirectories`` is plain (absent, null or strings), and its value."""
    value = fields.get("additionalDirectories")
    if value is None:
        return True, None
    return (True, cast(list[str], value)) if _is_str_list(value) else (False, None)


def _initialize(params: Any) -> Kwargs | None:
    fields = _fields(
        params,
        frozenset({"protocolVersion", "clientCapabilities", "clientInfo"}),
        frozenset({"protocolVersion"}),
    )
    if fields is None:
        return None
    version = fields["protocolVersion"]
    if type(version) is not int or not 0 <= version <= _MAX_PROTOCOL_VERSION:
        return None
    # Both objects are salvaged to defaults by the schema when malformed; the agent reads
    # neither, but anything that is not an object goes the long way all the same.
    if not all(isinstance(fields.get(k, {}), dict) for k in ("clientCapabilities", "clientInfo")):
        return None
    return {"protocol_version": version}


def _session_scope(params: Any, with_session: bool) -> Kwargs | None:
    """``session/new`` (or ``session/load`` ``with_session``) without MCP servers."""
    required = {"cwd", "mcpServers", *(("sessionId",) if with_session else ())}
    fields = _fields(params, frozenset({*required, "additionalDirectories"}), frozenset(required))
    if fields is None or not isinstance(fields["cwd"], str) or fields["mcpServers"] != []:
        return None
    if with_session and not isinstance(fields["sessionId"], str):
        return None
    plain, directories = _directories(fields)
    if not plain:
        return None
    kwargs: Kwargs = {"cwd": fields["cwd"], "additional_directories": directories}
    if with_session:
        kwargs["session_id"] = fields["sessionId"]
    return kwargs


def _new_session(params: Any) -> Kwargs | None:
    return _session_scope(params, with_session=False)


def _load_session(params: Any) -> Kwargs | None:
    return _session_scope(params, with_session=True)


_TEXT_BLOCK_KEYS = frozenset({"type", "text"})


def _prompt(params: Any) -> Kwargs | None:
    fields = _fields(params, frozenset({"sessionId", "prompt"}), frozenset({"sessionId", "prompt"}))
    if fields is None or not isinstance(fields["sessionId"], str):
        return None
    blocks = fields["prompt"]
    if not isinstance(blocks, list):
        return None
    for block in cast(list[Any], blocks):
        if not isinstance(block, dict):
            return None
        block_fields = cast(Kwargs, block)
        if block_fields.keys() != _TEXT_BLOCK_KEYS or block_fields["type"] != "text":
            return None
        if not isinstance(block_fields["text"], str):
            return None
    return {"session_id": fields["sessionId"], "prompt": blocks}


def _cancel(params: Any) -> Kwargs | None:
    fields = _fields(params, frozenset({"sessionId"}), frozenset({"sessionId"}))
    if fields is None or not isinstance(fields["sessionId"], str):
        return None
    return {"session_id": fields["sessionId"]}


_Check = Callable[[Any], "Kwargs | None"]

# method → (plain-params check, handler attribute); requests and notifications apart.
_REQUESTS: dict[str, tuple[_Check, str]] = {
    "initialize": (_initialize, "initialize"),
    "session/new": (_new_session, "new_session"),
    "session/load": (_load_session, "load_session"),
    "session/prompt": (_prompt, "prompt"),
}
_NOTIFICATIONS: dict[str, tuple[_Check, str]] = {"session/cancel": (_cancel, "cancel")}


def plain_params(method: Any, params: Any, is_notification: bool) -> tuple[str, Kwargs] | None:
    """The handler attribute and its keywords when ``params`` are plain for ``method``.

    ``None`` means the request needs ``acp``'s router: an unknown method, or params outside
    the plain subset (which ``acp``'s schema may still accept, salvage or reject).
    """
    if not isinstance(method, str):
        return None
    route = (_NOTIFICATIONS if is_notification else _REQUESTS).get(method)
    if route is None:
        return None
    check, attr = route
    kwargs = check(params)
    return None if kwargs is None else (attr, kwargs)


class RequestDispatcher:
    """The connection's method handler: plain requests straight to ``server``'s handlers,
    the rest through ``acp``'s router (built by ``build_router`` on first use).

    Args:
        server: the object whose ``initialize``, ``new_session``… methods serve the requests.
        build_router: builds ``acp``'s router bound to ``server`` (imports ``acp``).
    """

    def __init__(self, server: object, build_router: Callable[[], MessageRouter]) -> None:
        self._server = server
        self._build_router = build_router
        self._router: MessageRouter | None = None

    async def __call__(self, method: Any, params: Any, is_notification: bool) -> Any:
        plain = plain_params(method, params, is_notification)
        if plain is not None:
            attr, kwargs = plain
            handler = cast(Callable[..., Awaitable[Any]], getattr(self._server, attr))
            return await handler(**kwargs)
        return await self._through_acp(method, params, is_notification)

    async def _through_acp(self, method: Any, params: Any, is_notification: bool) -> Any:
        from acp.exceptions import RequestError  # noqa: PLC0415 (the ~0.4 s import, on demand)

        if self._router is None:
            self._router = self._build_router()
        route: MethodHandler = self._router
        try:
            return await route(method, params, is_notification)
        except RequestError as exc:
            raise _AcpError(exc.to_error_obj()) from exc


class _AcpError(ProtocolError):
    """An error ``acp``'s router raised, answered with its error object unchanged."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(int(error["code"]), str(error["message"]), error.get("data"))
        self._error = error

    def to_error_obj(self) -> dict[str, Any]:
        return self._error

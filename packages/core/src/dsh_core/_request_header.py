"""The request header: what every model request of a session carries besides its messages.

Upstream's later logs write it as ``request/header {header:{config, system?, tools?}, reason}``
(``../shared/upstream-corpus/head``) whenever it changes, so a reader of the log knows which
provider, model, sampling settings, system prompt and tool definitions each call was made
with. Replay compares it with what the live agent asks now (``dsh_llm_replay``), so a changed
prompt, tool description or model cannot replay green against a stale recording.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NotRequired, TypedDict, cast

from dsh_core._events import Event
from dsh_core._model import ModelRequest, RequestConfig, ToolSpec

__all__ = [
    "REQUEST_HEADER_EVENT",
    "RequestHeader",
    "RequestHeaderReason",
    "header_change",
    "latest_request_header",
    "request_header",
    "request_header_event",
]

REQUEST_HEADER_EVENT = "request/header"

RequestHeaderReason = Literal["initial", "resume", "change"]
"""``initial``: the session's first header; ``resume``: its first one after inheriting a seed
that had one; ``change``: the header differs from the session's previous one."""


class RequestHeader(TypedDict):
    """``config`` (provider, model, sampling), the system prompt and the tools, as sent."""

    config: RequestConfig
    system: NotRequired[str]
    tools: NotRequired[list[ToolSpec]]


def request_header(config: RequestConfig, request: ModelRequest) -> RequestHeader:
    """The canonical header of ``request`` sent with ``config``.

    As upstream's ``canonicalHeader``: an empty system prompt and an empty tool list are
    omitted, not written empty. The values are copies, so the header a log holds never
    changes with a later edit of the agent's tool specs.
    """
    header = RequestHeader(config=cast(RequestConfig, dict(config)))
    if request.system:
        header["system"] = request.system
    if request.tools:
        header["tools"] = [
            ToolSpec(
                name=spec["name"],
                description=spec["description"],
                parameters=_copy(spec["parameters"]),
            )
            for spec in request.tools
        ]
    return header


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in cast(dict[str, Any], value).items()}
    if isinstance(value, list):
        return [_copy(v) for v in cast(list[Any], value)]
    return value


def request_header_event(
    seq: int, time: int, header: RequestHeader, reason: RequestHeaderReason
) -> Event:
    """``request/header {header, reason}``."""
    return Event(REQUEST_HEADER_EVENT, seq, time, {"header": header, "reason": reason})


def latest_request_header(events: Sequence[Event], start: int = 0) -> dict[str, Any] | None:
    """The ``header`` of the last ``request/header`` in ``events[start:]``, ``None`` if none.

    The value is returned as the log holds it (it may be upstream's normalised form, whose
    ``system`` and ``tools`` are placeholders), not validated.
    """
    for index in range(len(events) - 1, start - 1, -1):
        event = events[index]
        if event.type == REQUEST_HEADER_EVENT:
            header = event.data.get("header")
            return cast(dict[str, Any], header) if isinstance(header, dict) else None
    return None


def header_change(
    events: Sequence[Event], own_start: int, header: RequestHeader
) -> RequestHeaderReason | None:
    """Why ``header`` must be logged before the next call of a session, or ``None``.

    Args:
        events: the session's events, seed included.
        own_start: where the session's own events begin (its ``seedLength``): a header in
            the seed is the parent's, so the session still logs its own.
        header: the header of the call about to be made.
    """
    own = latest_request_header(events, own_start)
    if own is None:
        return "resume" if latest_request_header(events) is not None else "initial"
    return None if own == header else "change"

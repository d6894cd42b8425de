"""The live API's rules, as the scripted server's strict mode enforces them (checked 2026-11-30).

DeepSeek answers errors as ``{"error": {"message", "type", "param": null, "code"}}``. Since
2026-07-24 a retired or unknown model name gets HTTP 400 "The supported API model names are …";
in thinking mode (the default of today's models) every assistant message with ``tool_calls``
must carry ``reasoning_content`` back (guides/thinking_mode), else HTTP 400.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

__all__ = ["DEFAULT_MESSAGES", "api_error", "check_chat_body", "model_list"]

DEFAULT_MESSAGES: dict[int, tuple[str, str]] = {
    400: ("Invalid request format", "invalid_request_error"),
    401: ("Authentication Fails, Your api key is invalid", "authentication_error"),
    402: ("Insufficient Balance", "unknown_error"),
    422: ("Invalid Parameters", "invalid_request_error"),
    429: ("Rate Limit Reached", "rate_limit_error"),
    500: ("Server Error", "server_error"),
    503: ("Server Overloaded", "server_error"),
}
"""DeepSeek's message and type per status (its error-code page), for faults without a message."""

_EFFORTS = ("low", "high", "max")
_THINKING = ("enabled", "disabled")


def api_error(status: int, message: str | None = None) -> dict[str, Any]:
    """An error body in the live API's shape."""
    default, kind = DEFAULT_MESSAGES.get(status, (f"HTTP {status}", "server_error"))
    return {
        "error": {
            "message": message or default,
            "type": kind,
            "param": None,
            "code": "invalid_request_error",
        }
    }


def model_list(models: Sequence[str]) -> dict[str, Any]:
    """The body of ``GET /models``."""
    return {
        "object": "list",
        "data": [{"id": m, "object": "model", "owned_by": "deepseek"} for m in models],
    }


def _names(models: Sequence[str]) -> str:
    return models[0] if len(models) == 1 else ", ".join(models[:-1]) + " or " + models[-1]


def check_chat_body(body: dict[str, Any] | None, models: Sequence[str]) -> str | None:
    """Why the live API would answer this chat request with HTTP 400, or ``None``."""
    if body is None:
        return "Failed to deserialize the JSON body into the target type"
    model = body.get("model")
    if model not in models:
        return (
            f"The supported API model names are {_names(models)}, but you passed {model}."
            if isinstance(model, str)
            else "Failed to deserialize the JSON body into the target type: missing field `model`"
        )
    thinking: Any = body.get("thinking", {"type": "enabled"})
    kind = cast(dict[str, Any], thinking).get("type") if isinstance(thinking, dict) else None
    if kind not in _THINKING:
        return f"thinking.type must be one of {', '.join(_THINKING)}, got {kind!r}"
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in _EFFORTS:
        return f"reasoning_effort must be one of {', '.join(_EFFORTS)}, got {effort!r}"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty array"
    if kind == "disabled":
        return None
    for index, message in enumerate(cast(list[Any], messages)):
        if not isinstance(message, dict):
            return f"messages[{index}] must be an object"
        fields = cast(dict[str, Any], message)
        if fields.get("role") != "assistant" or not fields.get("tool_calls"):
            continue
        if not isinstance(fields.get("reasoning_content"), str):
            return (
                "Missing `reasoning_content` field in the assistant message at message index "
                f"{index}. For more information, please refer to "
                "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
            )
    return None

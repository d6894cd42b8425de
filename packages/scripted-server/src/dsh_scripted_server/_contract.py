"""The live API's rules, as the scripted server's strict mode enforces them.

Errors come as OpenAI's ``{"error": {"message", "type", "param": null, "code"}}``. An unknown
model gets HTTP 400 "The supported API model names are …" (DeepSeek's wording since
2026-07-24); the profile adds its own rules (``ChatSettings.wire_problem``: DeepSeek's
thinking mode wants ``reasoning_content`` back on every tool-call turn).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from dsh_llm_openai import ChatSettings

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
"""Message and type per status (DeepSeek's error-code page), for faults without a message."""


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


def model_list(models: Sequence[str], owner: str) -> dict[str, Any]:
    """The body of ``GET /models``."""
    return {
        "object": "list",
        "data": [{"id": m, "object": "model", "owned_by": owner} for m in models],
    }


def _names(models: Sequence[str]) -> str:
    return models[0] if len(models) == 1 else ", ".join(models[:-1]) + " or " + models[-1]


def check_chat_body(
    body: dict[str, Any] | None, models: Sequence[str], profile: type[ChatSettings]
) -> str | None:
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
    # The profile's rules first: DeepSeek checks its thinking fields before the messages.
    problem = profile.wire_problem(body)
    if problem is not None:
        return problem
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty array"
    for index, message in enumerate(cast(list[Any], messages)):
        if not isinstance(message, dict):
            return f"messages[{index}] must be an object"
    return None

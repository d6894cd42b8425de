"""What each way a chat-completions call can fail becomes: a ``ModelError`` code, and whether
to retry.

The mapping follows upstream's ``adapter.ts`` (``httpErrorCode``) and ``translate.ts``
(``mapFinishReason``, the ``EMPTY_RESPONSE`` rule); the retry decisions follow its default
policy: transient failures (429, 5xx, transport, timeouts, an empty completion,
``insufficient_system_resource``) are retried, what the caller must fix is not.
"""

from __future__ import annotations

import email.utils
import random
import re
import time
from dataclasses import dataclass

from dsh_core import ModelError
from dsh_llm_openai._settings import ChatSettings

__all__ = [
    "AttemptFailed",
    "Failure",
    "backoff",
    "finish_failure",
    "retry_after_seconds",
    "status_failure",
    "stream_error_failure",
]

_QUOTA = re.compile(r"quota|insufficient[ _]balance|balance|credit", re.IGNORECASE)
_CONTEXT = re.compile(
    r"context[ _](length|window)|maximum context|too many tokens|prompt is too long", re.IGNORECASE
)
_RESOURCE = "insufficient_system_resource"


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed attempt: the error to raise, and whether another attempt may succeed.

    Attributes:
        error: the (already redacted) error.
        retryable: worth another attempt when nothing has been yielded yet.
        retry_after: the server's ``Retry-After`` in seconds, when it sent one.
    """

    error: ModelError
    retryable: bool
    retry_after: float | None = None


class AttemptFailed(Exception):
    """Raised inside one attempt; the client retries it or raises ``failure.error``."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.error.message)
        self.failure = failure


def status_failure(
    status: int, summary: str, retry_after: float | None, label: str = "Model"
) -> Failure:
    """A non-200 answer; ``summary`` is the redacted one-line gist of its body, ``label`` the
    API's name in messages (``ChatSettings.label``)."""
    text = f"{label} API error (HTTP {status}): {summary}"
    if status in (401, 403):
        return Failure(ModelError(text, code="AUTH", status=status), False)
    if status == 402 or (status == 429 and _QUOTA.search(summary)):
        return Failure(
            ModelError(
                f"{text} (the account's balance is exhausted: top it up, then retry)",
                code="QUOTA",
                status=status,
            ),
            False,
        )
    if status == 429:
        return Failure(ModelError(text, code="RATE_LIMIT", status=status), True, retry_after)
    if status == 400:
        code = "CONTEXT_WINDOW_EXCEEDED" if _CONTEXT.search(summary) else "BAD_REQUEST"
        return Failure(ModelError(text, code=code, status=status), False)
    if status >= 500:  # a 503 may say when to come back, too
        return Failure(ModelError(text, code="SERVER", status=status), True, retry_after)
    return Failure(ModelError(text, code=f"HTTP_{status}", status=status), False)


def stream_error_failure(summary: str, label: str = "Model") -> Failure:
    """An ``error`` event inside the stream; ``summary`` is its redacted one-line message."""
    text = f"{label} API error (in stream): {summary}"
    if _RESOURCE in summary:
        return Failure(ModelError(text, code=_RESOURCE.upper()), True)
    return Failure(ModelError(text, code="SERVER"), True)


def finish_failure(reason: str | None, opened_blocks: int, label: str = "Model") -> Failure | None:
    """The failure a completed stream's ``finish_reason`` means, or ``None`` for a good one.

    ``stop`` (or none) with no content block is an empty completion (``EMPTY_RESPONSE``,
    retried); ``insufficient_system_resource`` is retried; ``content_filter`` and any other
    unknown reason end the turn with the reason as the code.
    """
    if reason in (None, "stop") and opened_blocks == 0:
        return Failure(
            ModelError(
                f"{label} API error: the model returned a completed response with no content",
                code="EMPTY_RESPONSE",
            ),
            True,
        )
    if reason is None or reason in ("stop", "tool_calls", "length"):
        return None
    if reason == _RESOURCE:
        return Failure(
            ModelError(
                f"{label} API error: the service stopped the response for lack of resources "
                "(finish_reason insufficient_system_resource)",
                code=_RESOURCE.upper(),
            ),
            True,
        )
    if reason == "content_filter":
        return Failure(
            ModelError(
                f"{label} stopped the response: its content filter blocked the output "
                "(finish_reason content_filter); rephrase the prompt to continue",
                code="CONTENT_FILTER",
            ),
            False,
        )
    printable = reason if reason.isprintable() and len(reason) <= 64 else repr(reason[:64])
    return Failure(
        ModelError(
            f"{label} stopped the response with finish_reason {printable!r}",
            code=re.sub(r"[^A-Z0-9_]", "_", printable.upper()),
        ),
        False,
    )


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds: delta-seconds or an HTTP date; ``None`` if unusable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return seconds if seconds > 0 else None


def backoff(settings: ChatSettings, attempt: int, retry_after: float | None) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based).

    The server's ``Retry-After`` when it sent one (capped by ``max_retry_after``), else
    ``retry_base_wait`` doubling per attempt up to ``retry_max_wait``, with ``retry_jitter``.
    """
    if retry_after is not None:
        return min(retry_after, settings.max_retry_after)
    wait = min(settings.retry_base_wait * 2 ** (attempt - 1), settings.retry_max_wait)
    return wait * random.uniform(1 - settings.retry_jitter, 1 + settings.retry_jitter)

"""Keys out of provider messages, and provider error bodies as one bounded line.

Every text a provider sends back (HTTP error bodies, error events inside the stream, transport
error descriptions) passes through :class:`Redactor` *before* it is cut to size, so a key that
straddles a cut can never survive in part. Issue #8 lists the paths; the tests walk them.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any, cast

from pydantic import SecretStr

__all__ = ["MAX_SUMMARY", "REDACTED", "Redactor", "summarise_body"]

REDACTED = "[redacted]"
MAX_SUMMARY = 300
"""Characters a one-line summary of a provider message may take (before the ellipsis)."""

# DeepSeek and OpenAI keys are "sk-" and a run of letters, digits, "_" or "-"; providers echo
# masked fragments ("sk-abc…xyz") too. Sixteen characters keep ordinary words out.
_KEY_SHAPED = re.compile(r"sk-[A-Za-z0-9_\-]{16,}")
# A key cut at the end of a bounded read: any "sk-" run touching the end is a fragment.
_TRAILING_FRAGMENT = re.compile(r"sk-[A-Za-z0-9_\-]*\Z")
_SHORTEST_KEY_PREFIX = 4
_GENERIC_CODE = "invalid_request_error"
_WHITESPACE = re.compile(r"\s+")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_H1 = re.compile(r"<h1[^>]*>(.*?)</h1>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


class Redactor:
    """Replaces the configured key and every key-shaped token with ``[redacted]``.

    Args:
        key: the API key in use (``None`` when none is configured).
    """

    def __init__(self, key: SecretStr | None) -> None:
        self._key = key

    def __repr__(self) -> str:
        return "Redactor(key=SecretStr('**********'))"

    def __call__(self, text: str, *, truncated: bool = False) -> str:
        """``text`` with every key removed.

        Args:
            text: any provider-controlled text.
            truncated: the text was cut at its end by a bounded read: a key fragment
                touching the end (a prefix of the key, or an ``sk-`` run) is removed too.
        """
        secret = self._key.get_secret_value() if self._key is not None else ""
        if secret:
            text = text.replace(secret, REDACTED)
        text = _KEY_SHAPED.sub(REDACTED, text)
        if truncated:
            text = _TRAILING_FRAGMENT.sub(REDACTED, text)
            if secret:
                for size in range(min(len(secret) - 1, len(text)), _SHORTEST_KEY_PREFIX - 1, -1):
                    if text.endswith(secret[:size]):
                        text = text[:-size] + REDACTED
                        break
        return text


def one_line(text: str, limit: int = MAX_SUMMARY) -> str:
    """Whitespace collapsed to single spaces, cut to ``limit`` characters with an ellipsis."""
    flat = _WHITESPACE.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[:limit].rstrip() + "…"


def summarise_body(text: str, fallback: str) -> str:
    """One bounded line saying what an error body says.

    ``text`` must already be redacted. A JSON body gives its ``error.message`` (or ``message``,
    or ``error`` when it is a string) and ``error.code``; an HTML page gives its title (or first
    heading); any other text gives its first characters; an empty body gives ``fallback``.
    """
    stripped = text.strip()
    if not stripped:
        return one_line(fallback)
    try:
        doc: Any = json.loads(stripped)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        message = error_message(cast(dict[str, Any], doc))
        if message is not None:
            return one_line(message)
    if stripped.startswith("<") or "<html" in stripped[:512].lower():
        match = _TITLE.search(stripped) or _H1.search(stripped)
        title = html.unescape(_TAG.sub("", match.group(1))) if match else ""
        title = one_line(title, MAX_SUMMARY // 2) if title.strip() else one_line(fallback)
        return f"an HTML page ({title}) instead of a JSON error"
    return one_line(stripped)


def error_message(doc: dict[str, Any]) -> str | None:
    """The message of an OpenAI-style error object (``{"error": {...}}`` or the inner object)."""
    error: Any = doc.get("error", doc)
    if isinstance(error, str):
        return error
    if not isinstance(error, dict):
        return None
    fields = cast(dict[str, Any], error)
    message = fields.get("message")
    if not isinstance(message, str):
        return None
    code = fields.get("code")
    # DeepSeek puts "invalid_request_error" in every code: only a specific one says more.
    if isinstance(code, str) and code and code not in message and code != _GENERIC_CODE:
        return f"{message} ({code})"
    return message

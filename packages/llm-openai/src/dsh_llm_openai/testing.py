"""Test helpers of the wire, for any profile: settings a test can build without the environment.

``settings_factory(DeepSeekSettings)`` (or ``ChatSettings``, or any profile) returns a factory
``make(base_url, **overrides)`` whose settings have short timeouts and retry waits (a test of a
retry or an idle stream takes milliseconds, not minutes) and a fake key built at run time. Every
field is given explicitly, so nothing the caller happens to have exported (``OPENAI_MODEL``, a
profile's key …) leaks into a test: pydantic-settings reads the environment only for a
field the constructor was not given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from pydantic import SecretStr

from dsh_core import Chunk
from dsh_llm_openai._settings import ChatSettings

__all__ = ["TEST_KEY", "SHORT_WAITS", "FinishKind", "settings_factory", "text_response"]

# Built at run time: no key-shaped string is committed (HELPERS.md).
TEST_KEY = "sk-" + "dsh-wire-test-" + "0" * 12
"""The fake key :func:`settings_factory` puts in every settings object."""

SHORT_WAITS: dict[str, Any] = {
    "connect_timeout": 2.0,
    "stream_idle_timeout": 5.0,
    "send_session_id": True,
    "max_retries": 2,
    "retry_base_wait": 0.01,
    "retry_max_wait": 0.05,
    "max_retry_after": 2.0,
}
"""The timeouts and waits :func:`settings_factory` sets (``send_session_id`` too: the scripted
model server routes by the session header)."""

S = TypeVar("S", bound=ChatSettings)


def settings_factory(cls: type[S], key: str = TEST_KEY) -> Callable[..., S]:
    """A factory of ``cls`` settings for tests: ``make(base_url, **overrides)``.

    Args:
        cls: :class:`~dsh_llm_openai.ChatSettings` or a profile's subclass.
        key: the API key every settings object gets (:data:`TEST_KEY` by default).

    Returns:
        ``make(base_url, **overrides)``: ``cls`` with ``key``, ``base_url``,
        :data:`SHORT_WAITS`, every other field at its default, then ``overrides``; no field is
        read from the environment.
    """

    def make(base_url: str, **overrides: Any) -> S:
        values: dict[str, Any] = {
            name: info.get_default(call_default_factory=True)
            for name, info in cls.model_fields.items()
            if not info.is_required()
        }
        values |= {"api_key": SecretStr(key), "base_url": base_url, **SHORT_WAITS, **overrides}
        return cls(**values)

    return make


FinishKind = Literal["stop", "tool-calls", "max-tokens", "error"]


def text_response(
    text_parts: list[str], reasoning_parts: list[str] | None = None, finish: FinishKind = "stop"
) -> list[Chunk]:
    """The chunks of one text answer (reasoning first when given), shaped the way the June
    recordings are: a scripted server's session to stream, or a client's expected output."""
    out: list[Chunk] = []
    ends: list[Chunk] = []
    index = 0
    if reasoning_parts:
        out.append({"type": "block-start", "index": 0, "blockType": "reasoning"})
        out.extend({"type": "reasoning-delta", "index": 0, "text": p} for p in reasoning_parts)
        ends.append(
            {
                "type": "block-end",
                "index": 0,
                "block": {"type": "reasoning", "text": "".join(reasoning_parts)},
            }
        )
        index = 1
    out.append({"type": "block-start", "index": index, "blockType": "text"})
    out.extend({"type": "text-delta", "index": index, "text": p} for p in text_parts)
    ends.append(
        {
            "type": "block-end",
            "index": index,
            "block": {"type": "text", "text": "".join(text_parts)},
        }
    )
    out.extend(ends)
    out.append(
        {
            "type": "usage",
            "usage": {
                "inputTokens": 11,
                "outputTokens": 7,
                "cacheReadTokens": 64,
                "reasoningTokens": 3,
            },
        }
    )
    out.append({"type": "finish", "reason": {"kind": finish}})
    return out

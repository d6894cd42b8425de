"""dsh chunks → OpenAI-compatible ``chat.completion.chunk`` events, as DeepSeek sends them.

The inverse of the client's mapping: block-start / block-end are implicit in the protocol and
send nothing, every delta is one event, the finish is one event carrying ``finish_reason`` and
(when a ``usage`` chunk preceded it) the DeepSeek ``usage`` object.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from dsh_core import Chunk, Usage

__all__ = ["ChunkEncoder"]

_FINISH_REASONS = {
    "stop": "stop",
    "tool-calls": "tool_calls",
    "max-tokens": "length",
    "error": "insufficient_system_resource",
}


def _usage(usage: Usage) -> dict[str, Any]:
    fresh, cached = usage["inputTokens"], usage["cacheReadTokens"]
    return {
        "prompt_tokens": fresh + cached,
        "completion_tokens": usage["outputTokens"],
        "total_tokens": fresh + cached + usage["outputTokens"],
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": usage["reasoningTokens"]},
        "prompt_cache_hit_tokens": cached,
        "prompt_cache_miss_tokens": fresh,
    }


class ChunkEncoder:
    """Encodes one response's chunks, in order, into event payloads (JSON objects)."""

    def __init__(self, model: str) -> None:
        self._id = str(uuid.uuid4())
        self._created = int(time.time())
        self._model = model
        self._calls: dict[int, int] = {}  # block index → tool_calls[].index
        self._named: set[int] = set()
        self._usage: Usage | None = None
        self.finished = False

    def _event(
        self, delta: dict[str, Any] | None, finish: str | None = None, usage: Usage | None = None
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "system_fingerprint": "fp_scripted",
            "choices": []
            if delta is None
            else [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish},
            ],
        }
        if usage is not None:
            event["usage"] = _usage(usage)
        return event

    def preamble(self) -> dict[str, Any]:
        """The role-only first event DeepSeek sends (it carries no content)."""
        return self._event({"role": "assistant", "content": ""})

    def encode(self, chunk: Chunk) -> list[dict[str, Any]]:
        """The events for one chunk (none for block-start, block-end and usage)."""
        out: list[dict[str, Any]] = []
        if chunk["type"] == "block-start" or chunk["type"] == "block-end":
            return out
        if chunk["type"] == "usage":
            self._usage = chunk["usage"]
            return out
        if chunk["type"] == "finish":
            usage, self._usage = self._usage, None
            out.append(
                self._event(
                    {"content": "", "reasoning_content": None},
                    _FINISH_REASONS.get(chunk["reason"]["kind"], "error"),
                    usage,
                )
            )
            self.finished = True
            return out
        if self._usage is not None:  # a usage chunk in mid-stream: send it on its own
            out.extend(self.close())
        if chunk["type"] == "text-delta":
            out.append(self._event({"content": chunk["text"], "reasoning_content": None}))
        elif chunk["type"] == "reasoning-delta":
            out.append(self._event({"content": None, "reasoning_content": chunk["text"]}))
        else:
            block = chunk["index"]
            call: dict[str, Any]
            if block not in self._calls:
                self._calls[block] = len(self._calls)
                call = {
                    "index": self._calls[block],
                    "id": chunk["id"],
                    "type": "function",
                    "function": {"arguments": chunk["argumentsDelta"]},
                }
            else:
                call = {
                    "index": self._calls[block],
                    "function": {"arguments": chunk["argumentsDelta"]},
                }
            name = chunk.get("name")
            if name is not None and block not in self._named:
                self._named.add(block)
                call["function"] = {"name": name, **call["function"]}
            out.append(self._event({"content": None, "tool_calls": [call]}))
        return out

    def close(self) -> list[dict[str, Any]]:
        """A pending usage (no finish followed it) as a ``choices: []`` event."""
        usage, self._usage = self._usage, None
        return [] if usage is None else [self._event(None, usage=usage)]

"""Scripted replies: the chunks of one model call, for tests that script a model."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsh_core import Chunk, Usage

__all__ = ["text_reply", "tool_reply"]


_USAGE: Usage = {"inputTokens": 10, "outputTokens": 5, "cacheReadTokens": 0, "reasoningTokens": 0}


def text_reply(text: str, *, reasoning: str | None = None) -> list[Chunk]:
    """The chunks of a reply that thinks ``reasoning`` (one delta per word) and says ``text``."""
    chunks: list[Chunk] = []
    index = 0
    if reasoning is not None:
        chunks.append({"type": "block-start", "index": index, "blockType": "reasoning"})
        for word in _words(reasoning):
            chunks.append({"type": "reasoning-delta", "index": index, "text": word})
        chunks.append(
            {"type": "block-end", "index": index, "block": {"type": "reasoning", "text": reasoning}}
        )
        index += 1
    chunks.append({"type": "block-start", "index": index, "blockType": "text"})
    for word in _words(text):
        chunks.append({"type": "text-delta", "index": index, "text": word})
    chunks.append({"type": "block-end", "index": index, "block": {"type": "text", "text": text}})
    chunks.append({"type": "usage", "usage": _USAGE})
    chunks.append({"type": "finish", "reason": {"kind": "stop"}})
    return chunks


def tool_reply(*calls: tuple[str, str, Mapping[str, Any]]) -> list[Chunk]:
    """The chunks of a reply that calls tools: each call is ``(call id, tool name, arguments)``."""
    chunks: list[Chunk] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = json.dumps(arguments)
        half = len(raw) // 2
        chunks.append({"type": "block-start", "index": index, "blockType": "tool-call"})
        chunks.append(
            {
                "type": "tool-call-delta",
                "index": index,
                "id": call_id,
                "name": name,
                "argumentsDelta": raw[:half],
            }
        )
        chunks.append(
            {"type": "tool-call-delta", "index": index, "id": call_id, "argumentsDelta": raw[half:]}
        )
        chunks.append(
            {
                "type": "block-end",
                "index": index,
                "block": {"type": "tool-call", "id": call_id, "name": name, "arguments": raw},
            }
        )
    chunks.append({"type": "usage", "usage": _USAGE})
    chunks.append({"type": "finish", "reason": {"kind": "tool-calls"}})
    return chunks


def _words(text: str) -> list[str]:
    """``text`` cut before each space, so the pieces join back to it exactly."""
    pieces: list[str] = []
    for k, word in enumerate(text.split(" ")):
        pieces.append(word if k == 0 else " " + word)
    return [piece for piece in pieces if piece]

"""The OpenAI-compatible SSE stream → dsh chunks, one event at a time.

``sse_data`` turns lines into ``data:`` payloads; ``ChunkMapper`` turns each decoded event into
the chunks it implies. Blocks get indices in order of first appearance (reasoning, text and each
tool call are one block each); every ``block-end`` is held back to the end of the stream, where
they come in index order, then ``usage``, then ``finish``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from dsh_core import Chunk, ContentBlock, ModelError, Usage
from dsh_llm_openai._failures import AttemptFailed, stream_error_failure
from dsh_llm_openai._redact import one_line

__all__ = ["DONE", "ChunkMapper", "decode_event", "protocol_error", "sse_data"]

DONE = "[DONE]"

FinishKind = Literal["stop", "tool-calls", "max-tokens", "error", "aborted"]

_FINISH_KINDS: dict[str, FinishKind] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "length": "max-tokens",
}


async def sse_data(lines: AsyncIterator[str]) -> AsyncGenerator[str, None]:
    """Yield the ``data`` of each server-sent event as soon as its blank line arrives.

    Comments (``:`` lines, keep-alives) and other fields are skipped; a final event
    without its blank line is still delivered, since some servers end the body that way.
    """
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value.removeprefix(" "))
    if data:
        yield "\n".join(data)


def protocol_error(reason: str, label: str = "Model") -> ModelError:
    """A malformed stream: ``ModelError`` with code ``PROTOCOL``."""
    return ModelError(f"{label} API error (malformed stream): {reason}", code="PROTOCOL")


class _Malformed(Exception):
    """Raised by the field readers; :class:`ChunkMapper` turns it into a ``PROTOCOL`` error
    naming its API (the readers do not know the label)."""


def decode_event(data: str, label: str = "Model") -> dict[str, Any]:
    """Parse one ``data:`` payload as a JSON object, or raise a ``PROTOCOL`` error."""
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise protocol_error(f"event is not JSON ({exc})", label) from None
    if not isinstance(event, dict):
        raise protocol_error("event is not a JSON object", label)
    return cast(dict[str, Any], event)


@dataclass(slots=True)
class _Block:
    index: int
    kind: Literal["text", "reasoning", "tool-call"]
    parts: list[str] = field(default_factory=list[str])
    call_id: str = ""
    name: str | None = None

    def content(self) -> ContentBlock:
        text = "".join(self.parts)
        if self.kind == "tool-call":
            return {
                "type": "tool-call",
                "id": self.call_id,
                "name": self.name or "",
                "arguments": text,
            }
        if self.kind == "text":
            return {"type": "text", "text": text}
        return {"type": "reasoning", "text": text}


class ChunkMapper:
    """Maps decoded chat-completion events to chunks; call :meth:`end` after the last one.

    Args:
        redact: applied to every provider message (an in-stream ``error`` event) before it is
            cut to one line.
        label: the API's name in error messages (``ChatSettings.label``).
    """

    def __init__(self, redact: Callable[[str], str] = str, label: str = "Model") -> None:
        self._redact = redact
        self._label = label
        self._blocks: list[_Block] = []
        self._text: _Block | None = None
        self._reasoning: _Block | None = None
        self._calls: dict[int, _Block] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    def feed(self, event: dict[str, Any]) -> list[Chunk]:
        """Return the chunks one event implies (often one delta, sometimes none)."""
        error = event.get("error")
        if error is not None:
            summary = one_line(self._redact(_error_message(error)))
            raise AttemptFailed(stream_error_failure(summary, self._label))
        try:
            return self._feed(event)
        except _Malformed as exc:
            raise protocol_error(str(exc), self._label) from None

    def _feed(self, event: dict[str, Any]) -> list[Chunk]:
        out: list[Chunk] = []
        usage = event.get("usage")
        if usage is not None:
            self.usage = _usage(usage)
        choices = event.get("choices", [])
        if not isinstance(choices, list):
            raise _Malformed("'choices' is not an array")
        for choice in cast(list[Any], choices):
            if not isinstance(choice, dict):
                raise _Malformed("a choice is not an object")
            choice = cast(dict[str, Any], choice)
            if choice.get("index", 0) != 0:
                continue  # we ask for one choice; ignore any others
            delta: Any = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise _Malformed("'delta' is not an object")
            out.extend(self._delta(cast(dict[str, Any], delta)))
            reason = choice.get("finish_reason")
            if reason is not None:
                if not isinstance(reason, str):
                    raise _Malformed("'finish_reason' is not a string")
                self.finish_reason = reason
        return out

    @property
    def block_count(self) -> int:
        """How many blocks the stream has opened so far."""
        return len(self._blocks)

    def end(self, *, finish: bool = True) -> list[Chunk]:
        """The closing chunks: every ``block-end`` in index order, ``usage``, ``finish``.

        Args:
            finish: append the ``finish`` chunk (left out when the call ends with an error).
        """
        if self.finish_reason is None:
            raise protocol_error("the stream ended before a finish_reason", self._label)
        out: list[Chunk] = [
            {"type": "block-end", "index": b.index, "block": b.content()} for b in self._blocks
        ]
        if self.usage is not None:
            out.append({"type": "usage", "usage": self.usage})
        if finish:
            kind: FinishKind = _FINISH_KINDS.get(self.finish_reason, "error")
            out.append({"type": "finish", "reason": {"kind": kind}})
        return out

    def _open(self, kind: Literal["text", "reasoning", "tool-call"]) -> tuple[_Block, Chunk]:
        block = _Block(len(self._blocks), kind)
        self._blocks.append(block)
        return block, {"type": "block-start", "index": block.index, "blockType": kind}

    def _delta(self, delta: dict[str, Any]) -> list[Chunk]:
        out: list[Chunk] = []
        reasoning = _optional_str(delta, "reasoning_content")
        if reasoning:
            if self._reasoning is None:
                self._reasoning, start = self._open("reasoning")
                out.append(start)
            self._reasoning.parts.append(reasoning)
            out.append(
                {"type": "reasoning-delta", "index": self._reasoning.index, "text": reasoning}
            )
        content = _optional_str(delta, "content")
        if content:
            if self._text is None:
                self._text, start = self._open("text")
                out.append(start)
            self._text.parts.append(content)
            out.append({"type": "text-delta", "index": self._text.index, "text": content})
        calls = delta.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise _Malformed("'tool_calls' is not an array")
            for call in cast(list[Any], calls):
                if not isinstance(call, dict):
                    raise _Malformed("a tool call delta is not an object")
                out.extend(self._call(cast(dict[str, Any], call)))
        return out

    def _call(self, call: dict[str, Any]) -> list[Chunk]:
        position = call.get("index", len(self._calls))
        if not isinstance(position, int):
            raise _Malformed("a tool call's 'index' is not an integer")
        raw_function: Any = call.get("function") or {}
        if not isinstance(raw_function, dict):
            raise _Malformed("a tool call's 'function' is not an object")
        function = cast(dict[str, Any], raw_function)
        name = _optional_str(function, "name")
        arguments = _optional_str(function, "arguments") or ""
        out: list[Chunk] = []
        block = self._calls.get(position)
        if block is None:
            call_id = _optional_str(call, "id")
            if not call_id:
                raise _Malformed("a new tool call has no 'id'")
            block, start = self._open("tool-call")
            block.call_id = call_id
            self._calls[position] = block
            out.append(start)
        if name and block.name is None:
            block.name = name
        block.parts.append(arguments)
        delta: Chunk
        if block.name is None:
            delta = {
                "type": "tool-call-delta",
                "index": block.index,
                "id": block.call_id,
                "argumentsDelta": arguments,
            }
        else:
            delta = {
                "type": "tool-call-delta",
                "index": block.index,
                "id": block.call_id,
                "name": block.name,
                "argumentsDelta": arguments,
            }
        out.append(delta)
        return out


def _optional_str(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _Malformed(f"{key!r} is not a string")
    return value


def _int_field(obj: dict[str, Any], key: str) -> int:
    value = obj.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Malformed(f"usage field {key!r} is not an integer")
    return value


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        raise _Malformed("'usage' is not an object")
    usage = cast(dict[str, Any], raw)
    prompt = _int_field(usage, "prompt_tokens")
    details = usage.get("prompt_tokens_details")
    cached = 0
    if "prompt_cache_hit_tokens" in usage:
        cached = _int_field(usage, "prompt_cache_hit_tokens")
    elif isinstance(details, dict):
        cached = _int_field(cast(dict[str, Any], details), "cached_tokens")
    if "prompt_cache_miss_tokens" in usage:
        fresh = _int_field(usage, "prompt_cache_miss_tokens")
    else:
        fresh = prompt - cached
    completion_details = usage.get("completion_tokens_details")
    reasoning = 0
    if isinstance(completion_details, dict):
        reasoning = _int_field(cast(dict[str, Any], completion_details), "reasoning_tokens")
    return {
        "inputTokens": fresh,
        "outputTokens": _int_field(usage, "completion_tokens"),
        "cacheReadTokens": cached,
        "reasoningTokens": reasoning,
    }


def _error_message(error: Any) -> str:
    if isinstance(error, dict):
        fields = cast(dict[str, Any], error)
        message = fields.get("message")
        if isinstance(message, str):
            code = fields.get("code") or fields.get("type")
            return (
                f"{message} ({code})" if isinstance(code, str) and code not in message else message
            )
        return json.dumps(fields, ensure_ascii=False)
    return str(cast(object, error))

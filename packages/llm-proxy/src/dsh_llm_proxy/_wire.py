"""The chat-completions wire format on both sides of the proxy.

Requests: each message gets a canonical key (what session inference compares) and becomes log
events. Responses: the upstream's server-sent events are turned into dsh chunks by
``dsh_llm_openai.ChatClient`` itself, fed through an in-memory transport (one parser for
the whole project); chunks go back out as SSE events (``ChunkEncoder``) or as one
``chat.completion`` body for clients that did not ask for a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

import httpx
from pydantic import SecretStr

from dsh_core import Chunk, ContentBlock, ModelRequest, Usage
from dsh_llm_openai import ChatClient, ChatSettings, ChunkEncoder

__all__ = [
    "ChunkParser",
    "as_mapping",
    "finish_kind",
    "completion_body",
    "message_key",
    "message_text",
    "response_blocks",
    "response_key",
    "sse_events",
]

# As ChunkEncoder sends them, so that streamed and non-streamed replays agree.
_FINISH_REASONS = {
    "stop": "stop",
    "tool-calls": "tool_calls",
    "max-tokens": "length",
    "error": "insufficient_system_resource",
}


_EMPTY: Mapping[str, Any] = {}


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one (clients send odd shapes)."""
    return cast(Mapping[str, Any], value) if isinstance(value, Mapping) else _EMPTY


def message_text(content: Any) -> str:
    """A message's ``content`` as one string: a string as is, text parts joined, None as ""."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in cast(list[Any], content):
            if isinstance(part, Mapping):
                typed = cast(Mapping[str, Any], part)
                text = typed.get("text")
                # Non-text parts (images, audio) still tell conversations apart.
                parts.append(text if isinstance(text, str) else json.dumps(typed, sort_keys=True))
            else:
                parts.append(str(cast(object, part)))
        return "".join(parts)
    return json.dumps(content, sort_keys=True)


def _arguments_key(arguments: Any) -> Any:
    # Clients may re-serialise the arguments (spacing, key order); compare their JSON meaning.
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _key(role: str, content: str, calls: list[list[Any]], call_id: str | None) -> str:
    doc: dict[str, Any] = {"role": role, "content": content}
    if calls:
        doc["tool_calls"] = calls
    if call_id is not None:
        doc["tool_call_id"] = call_id
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def message_key(message: Mapping[str, Any]) -> str:
    """The canonical key of one request message; reasoning and metadata do not count."""
    role = str(message.get("role"))
    if role == "developer":
        role = "system"
    calls: list[list[Any]] = []
    raw_calls = message.get("tool_calls")
    if role == "assistant" and isinstance(raw_calls, list):
        for raw in cast(list[Any], raw_calls):
            call = as_mapping(raw)
            fn = as_mapping(call.get("function"))
            calls.append([call.get("id"), fn.get("name"), _arguments_key(fn.get("arguments"))])
    call_id = message.get("tool_call_id") if role == "tool" else None
    return _key(role, message_text(message.get("content")), calls, cast(str | None, call_id))


def response_blocks(chunks: Sequence[Chunk]) -> list[ContentBlock]:
    """The finished blocks of one response, from its ``block-end`` chunks, in index order."""
    ends = [c for c in chunks if c["type"] == "block-end"]
    return [c["block"] for c in sorted(ends, key=lambda c: c["index"])]


def response_key(chunks: Sequence[Chunk]) -> str:
    """The key of the assistant message a client will send back for this response."""
    blocks = response_blocks(chunks)
    text = "".join(b["text"] for b in blocks if b["type"] == "text")
    calls = [
        [b["id"], b["name"], _arguments_key(b["arguments"])]
        for b in blocks
        if b["type"] == "tool-call"
    ]
    return _key("assistant", text, calls, None)


def finish_kind(chunks: Sequence[Chunk]) -> str:
    """The ``finish`` chunk's reason kind (``error`` when there is none)."""
    for chunk in reversed(chunks):
        if chunk["type"] == "finish":
            return chunk["reason"]["kind"]
    return "error"


def _usage_json(model: str, usage: Usage) -> dict[str, Any]:
    # ChunkEncoder owns the OpenAI usage shape; borrow it rather than write it twice.
    encoder = ChunkEncoder(model)
    encoder.encode({"type": "usage", "usage": usage})
    return encoder.encode({"type": "finish", "reason": {"kind": "stop"}})[0]["usage"]


def completion_body(chunks: Sequence[Chunk], model: str) -> dict[str, Any]:
    """One ``chat.completion`` object holding what ``chunks`` streamed."""
    blocks = response_blocks(chunks)
    text = "".join(b["text"] for b in blocks if b["type"] == "text")
    reasoning = "".join(b["text"] for b in blocks if b["type"] == "reasoning")
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": b["arguments"]},
        }
        for b in blocks
        if b["type"] == "tool-call"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _FINISH_REASONS.get(finish_kind(chunks), "stop"),
            }
        ],
    }
    usage = next((c["usage"] for c in chunks if c["type"] == "usage"), None)
    if usage is not None:
        body["usage"] = _usage_json(model, usage)
    return body


def _sse(event: Mapping[str, Any] | str) -> bytes:
    data = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


async def sse_events(chunks: AsyncIterator[Chunk], model: str) -> AsyncIterator[bytes]:
    """Encode chunks as OpenAI ``chat.completion.chunk`` SSE events, then ``[DONE]``."""
    encoder = ChunkEncoder(model)
    yield _sse(encoder.preamble())
    async for chunk in chunks:
        for event in encoder.encode(chunk):
            yield _sse(event)
    for event in encoder.close():
        yield _sse(event)
    yield _sse("[DONE]")


# --- parsing the upstream stream with ChatClient -------------------------------------------------


class _FeedStream(httpx.AsyncByteStream):
    def __init__(self, queue: asyncio.Queue[bytes | None]) -> None:
        self._queue = queue

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (data := await self._queue.get()) is not None:
            yield data


class _FeedTransport(httpx.AsyncBaseTransport):
    """Answers the parser's one request with the bytes the proxy feeds it."""

    def __init__(self, queue: asyncio.Queue[bytes | None]) -> None:
        self._queue = queue

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"Content-Type": "text/event-stream"}, stream=_FeedStream(self._queue)
        )


class ChunkParser:
    """Turns upstream SSE bytes into timed dsh chunks while the proxy forwards them.

    ``feed`` each body piece as it arrives, then ``end``. The parsing runs in a task of its own
    so that forwarding never waits for it.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        settings = ChatSettings(
            api_key=SecretStr("parser"),  # never sent anywhere: the transport is in memory
            base_url="http://parser.invalid",
            max_retries=0,
        )
        self._client = ChatClient(settings, transport=_FeedTransport(self._queue))
        self.chunks: list[tuple[int, Chunk]] = []
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for chunk in self._client.stream(ModelRequest(session_id="proxy", messages=[])):
                self.chunks.append((time.time_ns() // 1_000_000, chunk))
        finally:
            await self._client.aclose()

    def feed(self, data: bytes) -> None:
        """Hand one piece of the response body to the parser."""
        self._queue.put_nowait(data)

    async def end(self) -> list[tuple[int, Chunk]]:
        """Close the body and wait for the parser.

        Returns:
            ``(epoch ms, chunk)`` pairs, ending with ``finish``.

        Raises:
            dsh_core.ModelError: the stream was malformed or ended before a finish.
        """
        self._queue.put_nowait(None)
        await self._task
        return self.chunks

    async def cancel(self) -> None:
        """Abandon parsing (the upstream call failed)."""
        self._queue.put_nowait(None)
        self._task.cancel()
        # The outcome no longer matters: the call is not recorded either way.
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task

"""``ModelRequest`` → the OpenAI-compatible chat-completions request body."""

from __future__ import annotations

from typing import Any

from dsh_core import Message, ModelRequest, ToolSpec

__all__ = ["build_body"]

# A user or tool message with several text blocks becomes one string: some OpenAI-compatible
# APIs (DeepSeek's among them) take ``content`` as a string only, not as an array of parts.
_BLOCK_SEPARATOR = "\n\n"


def build_body(
    request: ModelRequest,
    *,
    model: str,
    max_tokens: int | None,
    extra: dict[str, Any] | None = None,
    reasoning_pass_back: bool = False,
) -> dict[str, Any]:
    """Build the JSON body of a streaming ``POST /chat/completions``.

    Args:
        request: the step's request.
        model: the ``model`` field.
        max_tokens: the ``max_tokens`` field, omitted when ``None``.
        extra: the profile's own top-level fields (``ChatSettings.body_fields``: DeepSeek's
            ``thinking`` and ``reasoning_effort``), added after the standard ones.
        reasoning_pass_back: send each assistant message's reasoning back as
            ``reasoning_content`` (always on a tool-call turn, ``""`` when it streamed none).

    Returns:
        The body: ``model``, ``messages``, ``stream: true``, ``stream_options.include_usage``,
        the profile's fields and, when the request has any, ``tools`` and ``max_tokens``.
    """
    messages: list[dict[str, Any]] = []
    if request.system is not None:
        messages.append({"role": "system", "content": request.system})
    messages.extend(_message(m, reasoning_pass_back) for m in request.messages)
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    body.update(extra or {})
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec["name"],
            "description": spec["description"],
            "parameters": spec["parameters"],
        },
    }


_NO_OUTPUT = "(no output)"


def _message(message: Message, reasoning_pass_back: bool) -> dict[str, Any]:
    if message["role"] == "user":
        text = _BLOCK_SEPARATOR.join(b["text"] for b in message["content"])
        return {"role": "user", "content": text}
    if message["role"] == "tool":
        text = _BLOCK_SEPARATOR.join(b["text"] for b in message["content"])
        # empty tool output still needs some content on the wire (upstream serialize.ts)
        return {"role": "tool", "tool_call_id": message["callId"], "content": text or _NO_OUTPUT}
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message["content"]:
        if block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "reasoning":
            reasoning.append(block["text"])
        else:
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": block["arguments"]},
                }
            )
    # Text-less turns send "" and never null: the live API rejects a null-content assistant
    # message without tool calls, and some gateways reject null outright (upstream serialize.ts).
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    thought = "".join(reasoning)
    if reasoning_pass_back and (thought or calls):
        # DeepSeek's thinking mode wants every tool-call turn's reasoning back
        # (guides/thinking_mode): its live API answers 400 when it is missing, so a turn that
        # streamed none sends "".
        out["reasoning_content"] = thought
    if calls:
        out["tool_calls"] = calls
    return out

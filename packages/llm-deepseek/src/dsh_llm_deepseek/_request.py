"""``ModelRequest`` → the OpenAI-compatible chat-completions request body."""

from __future__ import annotations

from typing import Any

from dsh_core import Message, ModelRequest, ToolSpec
from dsh_llm_deepseek._settings import ReasoningEffort

__all__ = ["build_body"]

# A user or tool message with several text blocks becomes one string: DeepSeek's chat API
# takes ``content`` as a string, not as an array of parts.
_BLOCK_SEPARATOR = "\n\n"


def build_body(
    request: ModelRequest,
    *,
    model: str,
    max_tokens: int | None,
    reasoning_effort: ReasoningEffort | None = None,
) -> dict[str, Any]:
    """Build the JSON body of a streaming ``POST /chat/completions``.

    Args:
        request: the step's request.
        model: the ``model`` field.
        max_tokens: the ``max_tokens`` field, omitted when ``None``.
        reasoning_effort: the resolved effort (``DeepSeekSettings.effective_reasoning_effort``):
            ``off`` sends ``thinking: {type: disabled}``; ``low`` / ``high`` / ``max`` send
            ``thinking: {type: enabled}`` and ``reasoning_effort``; ``None`` sends neither.

    Returns:
        The body: ``model``, ``messages``, ``stream: true``, ``stream_options.include_usage``,
        the thinking fields and, when the request has any, ``tools``.
    """
    messages: list[dict[str, Any]] = []
    if request.system is not None:
        messages.append({"role": "system", "content": request.system})
    messages.extend(_message(m) for m in request.messages)
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    body.update(thinking_fields(reasoning_effort))
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


def thinking_fields(effort: ReasoningEffort | None) -> dict[str, Any]:
    """The wire fields of one resolved effort, as upstream's ``serialize.ts`` resolves them.

    ``off`` is ours, never the wire's: it becomes ``thinking: {type: disabled}`` with no effort.
    """
    if effort is None:
        return {}
    if effort == "off":
        return {"thinking": {"type": "disabled"}}
    return {"thinking": {"type": "enabled"}, "reasoning_effort": effort}


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


def _message(message: Message) -> dict[str, Any]:
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
    if thought or calls:
        # Thinking mode wants every tool-call turn's reasoning back (guides/thinking_mode): the
        # live API answers 400 when it is missing, so a turn that streamed none sends "".
        out["reasoning_content"] = thought
    if calls:
        out["tool_calls"] = calls
    return out

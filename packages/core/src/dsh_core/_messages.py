"""The model's view of a session: the conversation messages a log stands for."""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from dsh_core._events import ContentBlock, Event, TextBlock
from dsh_core._model import AssistantMessage, Message, ToolMessage, UserMessage
from dsh_core._session import Session

__all__ = ["delegated_prompts", "first_user_text", "messages_from_events", "session_messages"]

_ASSISTANT_BLOCK_TYPES = frozenset({"text", "reasoning", "tool-call"})


def messages_from_events(events: Iterable[Event]) -> list[Message]:
    """The conversation a log records, in order, for the next model request.

    ``user/message`` becomes a user message, ``assistant/message`` an assistant message (every
    block, reasoning included), ``tool/result`` a tool message, and ``context/message`` /
    ``steering/message`` a user message wrapped in ``<context source="…">`` … ``</context>``
    (``<steering …>``); every other event (chunks,
    turn and step markers, unknown types) is ignored. The June-era shapes are read exactly;
    the later upstream shapes, where the message sits in ``data.message`` and tool results are
    ``tool-result`` items of its content, are read best effort.

    Args:
        events: a session's logical events (seed included).

    Returns:
        The messages; blocks of kinds the model cannot take back are dropped.
    """
    messages: list[Message] = []
    _append_messages(messages, events)
    return messages


class _Conversation:
    """The messages of one session's log so far, and how much of the log they cover."""

    __slots__ = ("events", "last", "messages", "seen")

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self.seen = 0
        self.last: Event | None = None
        self.messages: list[Message] = []


# Weak: a closed session's conversation goes with it.
_CONVERSATIONS: weakref.WeakKeyDictionary[Session, _Conversation] = weakref.WeakKeyDictionary()


def session_messages(session: Session) -> list[Message]:
    """:func:`messages_from_events` of ``session.events``, kept incrementally.

    A session's log only grows, so each call converts just the events added since the last
    one: a step of a 1,000-call session costs what a step of a 10-call one does, where
    rebuilding every step made the whole run quadratic. A log that is not the one seen before
    (or that shrank, or whose last seen event changed) is converted again from the start.
    The message objects are shared between calls' lists: model clients read them, never
    write them.

    Returns:
        A new list (the caller may keep or extend it); its messages are shared.
    """
    events = session.events
    conversation = _CONVERSATIONS.get(session)
    if (
        conversation is None
        or conversation.events is not events
        or len(events) < conversation.seen
        or (conversation.seen and events[conversation.seen - 1] is not conversation.last)
    ):
        conversation = _Conversation(events)
        _CONVERSATIONS[session] = conversation
    if len(events) > conversation.seen:
        _append_messages(conversation.messages, events[conversation.seen :])
        conversation.seen = len(events)
        conversation.last = events[-1]
    return list(conversation.messages)


def _append_messages(messages: list[Message], events: Iterable[Event]) -> None:
    for event in events:
        if event.type == "user/message":
            content = _text_blocks(_content_of(event.data))
            if content:
                messages.append(UserMessage(role="user", content=content))
        elif event.type == "assistant/message":
            blocks = _assistant_blocks(_content_of(event.data))
            if blocks:
                messages.append(AssistantMessage(role="assistant", content=blocks))
        elif event.type == "tool/result":
            messages.extend(_tool_messages(event.data))
        elif event.type in _TAGGED:
            messages.append(_tagged(_TAGGED[event.type], event.data))


# Injected context and steering reach the model as user messages in an envelope that tells
# them apart from the user's own prompts (upstream's ``renderTagged``).
_TAGGED = {"context/message": "context", "steering/message": "steering"}


def _tagged(tag: str, data: Mapping[str, Any]) -> UserMessage:
    source = data.get("source")
    kind = cast(Mapping[str, Any], source).get("kind") if isinstance(source, Mapping) else None
    opening = f"<{tag} source={json.dumps(kind if isinstance(kind, str) else 'unknown')}>"
    return UserMessage(
        role="user",
        content=[
            TextBlock(type="text", text=opening),
            *_text_blocks(_content_of(data)),
            TextBlock(type="text", text=f"</{tag}>"),
        ],
    )


def _content_of(data: Mapping[str, Any]) -> list[Any]:
    content = data.get("content")
    if content is None:
        message = data.get("message")
        if isinstance(message, Mapping):
            content = cast(Mapping[str, Any], message).get("content")
    return cast(list[Any], content) if isinstance(content, list) else []


def _text_blocks(content: Sequence[Any]) -> list[TextBlock]:
    blocks: list[TextBlock] = []
    for item in content:
        if isinstance(item, Mapping):
            block = cast(Mapping[str, Any], item)
            text = block.get("text")
            if block.get("type") == "text" and isinstance(text, str):
                blocks.append(TextBlock(type="text", text=text))
    return blocks


def _assistant_blocks(content: Sequence[Any]) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    for item in content:
        if isinstance(item, Mapping):
            block = cast(Mapping[str, Any], item)
            if block.get("type") in _ASSISTANT_BLOCK_TYPES:
                blocks.append(cast(ContentBlock, dict(block)))
    return blocks


def _tool_messages(data: Mapping[str, Any]) -> list[ToolMessage]:
    call_id = data.get("callId")
    if isinstance(call_id, str):
        content = data.get("content")
        items = cast(list[Any], content) if isinstance(content, list) else []
        return [
            ToolMessage(
                role="tool",
                callId=call_id,
                content=_text_blocks(items),
                isError=bool(data.get("isError", False)),
            )
        ]
    # Later shape: data.message.content = [{type:"tool-result", toolCallId, content, isError}].
    messages: list[ToolMessage] = []
    for item in _content_of(data):
        if not isinstance(item, Mapping):
            continue
        result = cast(Mapping[str, Any], item)
        result_id = result.get("toolCallId")
        if result.get("type") != "tool-result" or not isinstance(result_id, str):
            continue
        inner = result.get("content")
        items = cast(list[Any], inner) if isinstance(inner, list) else []
        messages.append(
            ToolMessage(
                role="tool",
                callId=result_id,
                content=_text_blocks(items),
                isError=bool(result.get("isError", False)),
            )
        )
    return messages


def first_user_text(events: Iterable[Event]) -> str | None:
    """The text of the first user message among ``events`` (a child's own events begin with
    the prompt it was delegated), or ``None``."""
    for message in messages_from_events(events):
        if message["role"] == "user":
            return "".join(block["text"] for block in message["content"])
    return None


def delegated_prompts(events: Sequence[Event]) -> list[tuple[int, str, str]]:
    """``(position, callId, prompt)`` of every ``tool/call`` whose JSON arguments carry a
    string ``prompt`` (a subagent delegation), in log order; ``position`` is the event's
    index in ``events``. Calls with arguments that are not a JSON object are skipped."""
    out: list[tuple[int, str, str]] = []
    for position, event in enumerate(events):
        if event.type != "tool/call":
            continue
        call_id, raw = event.data.get("callId"), event.data.get("arguments")
        if not isinstance(call_id, str) or not isinstance(raw, str):
            continue
        try:
            arguments: Any = json.loads(raw)
        except ValueError:
            continue
        if isinstance(arguments, dict):
            prompt = cast(dict[str, Any], arguments).get("prompt")
            if isinstance(prompt, str):
                out.append((position, call_id, prompt))
    return out

"""Session events → ACP ``session/update`` payloads, in the exact June-era wire shapes.

The payloads are plain dicts built here rather than ``acp.schema`` models because the upstream
fixtures fix key order as well as key names (``sessionUpdate`` first); the test suite validates
every payload against ``acp.schema.SessionNotification`` so the shapes stay in the spec.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, cast

from dsh_core import Event, bash_argument_errors

__all__ = ["UpdateMapper", "replay_updates"]

JsonObject = dict[str, Any]

_BASH = "bash"


def _text_content(text: str) -> JsonObject:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _chunk_update(kind: str, text: str) -> JsonObject:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _parse_arguments(raw: Any) -> Any:
    """The model's argument string parsed, or the raw value when it is not valid JSON."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _result_text(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in cast(list[Any], content):
        if isinstance(block, Mapping):
            text = cast(Mapping[str, Any], block).get("text")
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts)


def _console(output: str) -> str:
    """Bash output fenced the way upstream's ``presentResult`` does (trailing newlines cut)."""
    return "```console\n" + output.rstrip("\n") + "\n```"


class UpdateMapper:
    """Maps one session's events to ``session/update`` payloads (the ``update`` object).

    Stateful: a ``tool/result`` is rendered according to its ``tool/call``, and a text block
    that arrived whole is shown only when no delta showed it.
    """

    def __init__(self) -> None:
        self._bash_calls: set[str] = set()  # calls presented as bash (well-formed arguments)
        self._streamed: set[tuple[Any, Any, Any]] = set()  # (turn, step, index) with deltas

    def updates_for(self, event: Event) -> list[JsonObject]:
        """The updates ``event`` produces (most events produce none)."""
        data = event.data
        if event.type == "assistant/chunk":
            return self._chunk(data.get("turn"), data.get("step"), data.get("chunk"))
        if event.type == "tool/call":
            return [self._tool_call(data)]
        if event.type == "tool/result":
            return [self._tool_result(data)]
        return []

    def _chunk(self, turn: Any, step: Any, chunk: Any) -> list[JsonObject]:
        if not isinstance(chunk, Mapping):
            return []
        fields = cast(Mapping[str, Any], chunk)
        key = (turn, step, fields.get("index"))
        if fields.get("type") == "block-end":
            return self._whole_block(key, fields.get("block"))
        text = fields.get("text")
        if not isinstance(text, str):
            return []
        if fields.get("type") == "reasoning-delta":
            self._streamed.add(key)
            return [_chunk_update("agent_thought_chunk", text)]
        if fields.get("type") == "text-delta":
            self._streamed.add(key)
            return [_chunk_update("agent_message_chunk", text)]
        return []

    def _whole_block(self, key: tuple[Any, Any, Any], block: Any) -> list[JsonObject]:
        """A text block that arrived whole in ``block-end``, with no deltas, is shown once
        (upstream does so; its recordings of non-streamed replies depend on it)."""
        if key in self._streamed or not isinstance(block, Mapping):
            return []
        fields = cast(Mapping[str, Any], block)
        text = fields.get("text")
        if fields.get("type") != "text" or not isinstance(text, str) or not text:
            return []
        return [_chunk_update("agent_message_chunk", text)]

    def _tool_call(self, data: Mapping[str, Any]) -> JsonObject:
        call_id = str(data.get("callId", ""))
        name = str(data.get("name", ""))
        arguments = _parse_arguments(data.get("arguments"))
        update: JsonObject = {"sessionUpdate": "tool_call", "toolCallId": call_id}
        bash = _valid_bash_arguments(name, arguments)
        if bash is not None:
            # Upstream's presentCall: the command is the title (an execute card hides
            # rawInput), the description a content block above it.
            command = bash["command"]
            self._bash_calls.add(call_id)
            return update | {
                "title": command,
                "kind": "execute",
                "status": "in_progress",
                "rawInput": command,
                "content": [_text_content(str(bash["description"]))],
            }
        kind = "execute" if name == _BASH else "other"
        update |= {"title": name, "kind": kind, "status": "in_progress", "rawInput": arguments}
        return update

    def _tool_result(self, data: Mapping[str, Any]) -> JsonObject:
        call_id = str(data.get("callId", ""))
        content = data.get("content")
        text = _result_text(content)
        # Upstream's presentResult fences exactly one text block of a well-formed bash call.
        if call_id in self._bash_calls and _single_text_block(content):
            text = _console(text)
        status = "failed" if data.get("isError") is True else "completed"
        return {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call_id,
            "status": status,
            "content": [_text_content(text)],
        }


def _valid_bash_arguments(name: str, arguments: Any) -> Mapping[str, Any] | None:
    """A ``bash`` call's arguments when they pass its schema, else ``None`` (upstream then
    presents the call generically)."""
    if name != _BASH or not isinstance(arguments, Mapping):
        return None
    parsed = cast(Mapping[str, Any], arguments)
    return None if bash_argument_errors(parsed) else parsed


def _single_text_block(content: Any) -> bool:
    if not isinstance(content, list) or len(cast(list[Any], content)) != 1:
        return False
    block: Any = cast(list[Any], content)[0]
    return isinstance(block, Mapping) and cast(Mapping[str, Any], block).get("type") == "text"


def replay_updates(events: Iterable[Event]) -> list[JsonObject]:
    """The updates that show a stored conversation to a client loading it.

    User messages become ``user_message_chunk``s (one per text block); everything the
    assistant and the tools did is rendered exactly as it was streamed live.
    """
    mapper = UpdateMapper()
    updates: list[JsonObject] = []
    for event in events:
        if event.type == "user/message":
            for block in _user_blocks(event.data.get("content")):
                updates.append(_chunk_update("user_message_chunk", block))
        else:
            updates.extend(mapper.updates_for(event))
    return updates


def _user_blocks(content: Any) -> list[str]:
    if not isinstance(content, list):
        return []
    texts: list[str] = []
    for block in cast(list[Any], content):
        if isinstance(block, Mapping):
            fields = cast(Mapping[str, Any], block)
            text = fields.get("text")
            if fields.get("type") == "text" and isinstance(text, str):
                texts.append(text)
    return texts

"""Upstream's ACP presentation cases as conformance cases for :class:`UpdateMapper`.

Sources (June 2026): ``tool-bash/tests/tools.spec.ts`` § "tool-owned UI presentation" (how the
ACP bridge shows a bash call and its result) and the whole-block text rule recorded in the
head corpus (``inline-image-prompt``: a text block with no deltas reaches the client as one
``agent_message_chunk``). ``acp-agent.spec.ts`` itself tests the cordis composition (plugin
export shape, Loader unwrapping): not applicable to a Python process. Ledger: COMPATIBILITY.md
§ "Upstream unit tests".
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_acp_agent import UpdateMapper
from dsh_core import Event


def _event(kind: str, data: dict[str, Any]) -> Event:
    return Event(kind, 0, 0, data)


def _call(arguments: dict[str, Any], name: str = "bash") -> Event:
    raw = json.dumps(arguments)
    return _event(
        "tool/call", {"turn": 1, "step": 1, "callId": "c", "name": name, "arguments": raw}
    )


def _result(content: list[dict[str, Any]], *, is_error: bool = False) -> Event:
    return _event(
        "tool/result",
        {"turn": 1, "step": 1, "callId": "c", "content": content, "isError": is_error},
    )


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _chunk(chunk: dict[str, Any], turn: int = 1, step: int = 1) -> Event:
    return _event("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})


def _shown(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "content", "content": block} for block in content]


@pytest.mark.parametrize(
    ("arguments", "title"),
    [
        # 'bash presentCall: title is the command, description as a content block'
        ({"command": "ls -la src", "description": "List files in src"}, "ls -la src"),
        ({"command": "pwd", "description": "Print dir", "workdir": "/tmp/x"}, "pwd"),
        ({"command": "pwd", "description": "Print dir", "workdir": "sub"}, "pwd"),
    ],
)
def test_bash_present_call(arguments: dict[str, Any], title: str) -> None:
    [update] = UpdateMapper().updates_for(_call(arguments))
    assert update == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c",
        "title": title,
        "kind": "execute",
        "status": "in_progress",
        "rawInput": arguments["command"],
        "content": _shown(_text(arguments["description"])),
    }


def test_present_call_validates_softly() -> None:
    # 'presentCall validates softly: malformed args (missing required description)'
    [update] = UpdateMapper().updates_for(_call({"command": "ls"}))
    assert (update["title"], update["rawInput"]) == ("bash", {"command": "ls"})
    assert "content" not in update


_BASH = {"command": "x", "description": "x"}


@pytest.mark.parametrize(
    ("case", "content", "is_error", "shown"),
    [
        (
            "console-block content trims trailing blank lines",
            _text("hi\n[exit code: 0]\n\n"),
            False,
            _text("```console\nhi\n[exit code: 0]\n```"),
        ),
        (
            "a non-zero exit is fenced as it is",
            _text("oops\n[exit code: 3]"),
            False,
            _text("```console\noops\n[exit code: 3]\n```"),
        ),
        (
            "an isError result is fenced too",
            _text("command aborted"),
            True,
            _text("```console\ncommand aborted\n```"),
        ),
        (
            "a result that is not exactly one block is not fenced",
            [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            False,
            _text("ab"),
        ),
    ],
)
def test_bash_present_result(
    case: str, content: list[dict[str, Any]], is_error: bool, shown: list[dict[str, Any]]
) -> None:
    mapper = UpdateMapper()
    mapper.updates_for(_call(_BASH))
    [update] = mapper.updates_for(_result(content, is_error=is_error))
    assert update["content"] == _shown(shown), case
    assert update["status"] == ("failed" if is_error else "completed")


def test_a_malformed_bash_call_gets_an_unfenced_result() -> None:
    mapper = UpdateMapper()
    mapper.updates_for(_call({"command": "ls"}))
    [update] = mapper.updates_for(_result(_text("out\n")))
    assert update["content"] == _shown(_text("out\n"))


def test_a_text_block_that_arrives_whole_is_one_message_chunk() -> None:
    mapper = UpdateMapper()
    shown = [
        update
        for chunk in (
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "DONE"}},
            {"type": "finish", "reason": {"kind": "stop"}},
        )
        for update in mapper.updates_for(_chunk(chunk))
    ]
    assert shown == [
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "DONE"}}
    ]


def test_a_streamed_text_block_is_not_shown_twice() -> None:
    mapper = UpdateMapper()
    assert mapper.updates_for(_chunk({"type": "text-delta", "index": 0, "text": "DO"})) != []
    end = {"type": "block-end", "index": 0, "block": {"type": "text", "text": "DO"}}
    assert mapper.updates_for(_chunk(end)) == []
    # The same index in the next step is another block.
    assert mapper.updates_for(_chunk(end, step=2)) != []


@pytest.mark.parametrize(
    "block",
    [
        {"type": "text", "text": ""},
        {"type": "reasoning", "text": "thinking"},
        {"type": "tool-call", "id": "c", "name": "bash", "arguments": "{}"},
    ],
)
def test_other_whole_blocks_show_nothing(block: dict[str, Any]) -> None:
    assert (
        UpdateMapper().updates_for(_chunk({"type": "block-end", "index": 0, "block": block})) == []
    )

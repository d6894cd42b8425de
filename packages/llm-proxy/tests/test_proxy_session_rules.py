"""Each session-inference rule of ``SessionBook`` on its own, without HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dsh_core import Chunk
from dsh_llm_proxy import SessionBook, SessionConflictError

Msg = dict[str, Any]
SYSTEM: Msg = {"role": "system", "content": "be brief"}


def user(text: str) -> Msg:
    return {"role": "user", "content": text}


def said(text: str) -> Msg:
    return {"role": "assistant", "content": text}


def call(
    book: SessionBook, messages: list[Msg], answer: list[Chunk], sid: str | None = None
) -> str:
    """One request and its answer; returns the session it went to."""
    assigned = book.assign({"model": "m", "messages": messages}, sid)
    book.finish(assigned, [(0, c) for c in answer])
    return assigned.session_id


@pytest.fixture
def book() -> SessionBook:
    return SessionBook(None)


def test_extension_continues_a_session_and_the_longest_wins(
    book: SessionBook, make_text: Callable[..., list[Chunk]]
) -> None:
    a = call(book, [SYSTEM, user("1")], make_text(["x"]))
    b = call(book, [SYSTEM, user("1"), said("x"), user("2")], make_text(["y"]))
    assert a == b
    c = call(book, [SYSTEM, user("other")], make_text(["z"]))
    assert c != a
    d = call(
        book, [SYSTEM, user("1"), said("x"), user("2"), said("y"), user("3")], make_text(["w"])
    )
    assert d == a
    assert book.session_ids == [a, c]


def test_a_divergence_after_completed_turns_is_a_fork_child(
    book: SessionBook, make_text: Callable[..., list[Chunk]]
) -> None:
    a = call(book, [user("1")], make_text(["x"]))
    call(book, [user("1"), said("x"), user("2")], make_text(["y"]))
    fork = book.assign({"messages": [user("1"), said("x"), user("2b")]})
    header = fork.tracked.header
    assert header.parent_session == a
    # turn/start, user/message, request/header, step/start, 5 chunks (block-start, delta,
    # block-end, usage, finish), assistant/message, step/end, turn/end
    assert header.seed_length == 12
    assert fork.new_from == 2


def test_a_fork_shared_by_parent_and_child_is_the_parents(
    book: SessionBook, make_text: Callable[..., list[Chunk]]
) -> None:
    a = call(book, [user("1")], make_text(["x"]))
    call(book, [user("1"), said("x"), user("2")], make_text(["y"]))
    first_fork = call(book, [user("1"), said("x"), user("3")], make_text(["z"]))
    second = book.assign({"messages": [user("1"), said("x"), user("4")]})
    assert first_fork != a
    assert second.tracked.header.parent_session == a


def test_a_new_session_is_the_child_of_the_latest_session_waiting_on_tools(
    book: SessionBook,
    make_text: Callable[..., list[Chunk]],
    make_tool_calls: Callable[..., list[Chunk]],
) -> None:
    lone = call(book, [user("alone")], make_text(["x"]))
    early = call(book, [user("early")], make_tool_calls(("c1", "t", {})))
    late = call(book, [user("late")], make_tool_calls(("c2", "t", {})))
    child = book.assign({"messages": [user("sub-task")]})
    assert child.tracked.header.parent_session == late
    assert child.tracked.header.origin == "subagent"
    # "late" itself started while "early" waited, so it is early's child: depth 2 here.
    late_header = next(h for h in book.headers if h.id == late)
    assert late_header.parent_session == early
    assert child.tracked.header.delegation_depth == 2
    book.abandon(child)
    # Once the late one is continued it no longer waits; the early one still does.
    tool_result: Msg = {"role": "tool", "tool_call_id": "c2", "content": "ok"}
    late_call: Msg = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "t", "arguments": "{}"}}
        ],
    }
    assert call(book, [user("late"), late_call, tool_result], make_text(["done"])) == late
    other = book.assign({"messages": [user("another")]})
    assert other.tracked.header.parent_session == early
    assert lone not in (early, late)


def test_a_busy_session_takes_no_second_request(
    book: SessionBook, make_text: Callable[..., list[Chunk]]
) -> None:
    a = call(book, [user("1")], make_text(["x"]))
    more = [user("1"), said("x"), user("2")]
    first = book.assign({"messages": more})
    second = book.assign({"messages": more})
    assert first.session_id == a
    assert second.session_id != a


def test_an_explicit_id_names_the_session(
    book: SessionBook, make_text: Callable[..., list[Chunk]]
) -> None:
    assert call(book, [user("1")], make_text(["x"]), sid="s-1") == "s-1"
    assert call(book, [user("1"), said("x"), user("2")], make_text(["y"]), sid="s-1") == "s-1"
    with pytest.raises(SessionConflictError, match="s-1"):
        book.assign({"messages": [user("unrelated")]}, "s-1")
    assert call(book, [user("1"), said("x"), user("2")], make_text(["z"]), sid="s-2") == "s-2"


def test_history_the_client_wrote_itself_is_logged_without_chunks(
    book: SessionBook, make_text: Callable[..., list[Chunk]]
) -> None:
    history: list[Msg] = [
        user("1"),
        {
            "role": "assistant",
            "content": "let me look",
            "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c9", "content": [{"type": "text", "text": "found"}]},
    ]
    assigned = book.assign({"messages": history})
    book.finish(assigned, [(0, c) for c in make_text(["ok"])])
    session = assigned.tracked.session
    assert session is not None
    types = [e.type for e in session.events]
    assert types[:8] == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "request/header",
    ]
    assert types.count("assistant/chunk") == 5
    assert types[-1] == "turn/end"
    result = next(e for e in session.events if e.type == "tool/result")
    assert result.data["content"] == [{"type": "text", "text": "found"}]

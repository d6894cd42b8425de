"""Sub-agents running in parallel, each through the real ``openai`` SDK on its own thread: do
their sessions attach to the right parent?

A parent asks for two ``delegate`` tool calls at once; each starts a sub-agent whose first
answer itself asks for a tool. The second sub-agent's first call therefore arrives while
*two* sessions wait on tool calls: the parent and its sibling. "The session that most recently
asked for tools" is the sibling, the wrong parent; the delegation prompt, which the parent's
tool call carries and the sub-agent's conversation opens with, names the right one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai

from dsh_core import Chunk

TASKS = ("Summarise the history of the Paris metro", "Summarise the history of the Rome metro")


def _client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="dummy-client-key", max_retries=0)


def _child(
    base_url: str,
    task: str,
    first_done: threading.Event | None = None,
    hold: threading.Event | None = None,
) -> str:
    """A sub-agent: one call that asks for ``lookup``, then one with its result.

    Args:
        first_done: set once the first answer (the tool call) is in.
        hold: the tool "runs" until this is set (a slow tool, made deterministic).
    """
    with _client(base_url) as client:
        history: list[Any] = [
            {"role": "system", "content": "You are a researcher."},
            {"role": "user", "content": task},
        ]
        first = client.chat.completions.create(model="m", messages=history)
        message = first.choices[0].message
        history.append(message.model_dump(exclude_none=True))
        if first_done is not None:
            first_done.set()
        if hold is not None:
            hold.wait(30)
        for call in message.tool_calls or []:
            history.append({"role": "tool", "tool_call_id": call.id, "content": "notes"})
        second = client.chat.completions.create(model="m", messages=history)
        return second.choices[0].message.content or ""


def _parent(base_url: str) -> dict[str, Any]:
    with _client(base_url) as client:
        history: list[Any] = [
            {"role": "system", "content": "You are a planner."},
            {"role": "user", "content": "Compare the two metros."},
        ]
        first = client.chat.completions.create(model="m", messages=history)
        message = first.choices[0].message
        history.append(message.model_dump(exclude_none=True))
        calls = [c for c in message.tool_calls or [] if c.type == "function"]
        tasks = [json.loads(c.function.arguments)["task"] for c in calls]
        # Both sub-agents run at once. The second sends its first request once the first has
        # its tool call, and the first's tool runs until the second has its own: the second
        # arrives while its sibling waits on a tool, every time, not by luck.
        one_asked, two_asked = threading.Event(), threading.Event()
        with ThreadPoolExecutor(2) as pool:
            one = pool.submit(_child, base_url, tasks[0], one_asked, two_asked)
            one_asked.wait(30)
            two = pool.submit(_child, base_url, tasks[1], two_asked)
            answers = [one.result(60), two.result(60)]
        for call, answer in zip(calls, answers, strict=True):
            history.append({"role": "tool", "tool_call_id": call.id, "content": answer})
        final = client.chat.completions.create(model="m", messages=history)
        return {"answers": answers, "final": final.choices[0].message.content}


def test_parallel_sub_agents_attach_to_the_parent_that_delegated_them(
    roundtrip: Any,
    make_text: Callable[..., list[Chunk]],
    make_tool_calls: Callable[..., list[Chunk]],
) -> None:
    parent = [
        make_tool_calls(
            ("call_p1", "delegate", {"task": TASKS[0]}), ("call_p2", "delegate", {"task": TASKS[1]})
        ),
        make_text(["Both ", "are ", "old."]),
    ]
    children = [
        [make_tool_calls((f"call_c{n}", "lookup", {"q": f"metro {n}"})), make_text([f"Done {n}."])]
        for n in (1, 2)
    ]
    result = roundtrip([parent, *children], _parent)
    assert result.recorded == result.replayed
    assert result.recorded == {"answers": ["Done 1.", "Done 2."], "final": "Both are old."}

    main, first, second = result.headers()
    assert main.parent_session is None
    assert first.parent_session == main.id
    assert second.parent_session == main.id  # not its sibling, which was waiting too
    assert first.delegation_depth == second.delegation_depth == 1
    openings = [
        next(e.data for e in result.events(h.id) if e.type == "user/message")["content"][0]["text"]
        for h in (first, second)
    ]
    assert openings == list(TASKS)


def test_sub_agents_of_two_waiting_parents_attach_to_their_own(
    roundtrip: Any,
    make_text: Callable[..., list[Chunk]],
    make_tool_calls: Callable[..., list[Chunk]],
) -> None:
    """Two top-level agents each wait on a delegation; their sub-agents then run at once, the
    second agent's first (so the first agent's sub-agent arrives while three sessions wait)."""
    tasks = ("Find the oldest bridge in Prague", "Find the oldest bridge in Vienna")

    def top(base_url: str, number: int) -> str:
        with _client(base_url) as client:
            history: list[Any] = [{"role": "user", "content": f"Question {number} about bridges"}]
            first = client.chat.completions.create(model="m", messages=history)
            message = first.choices[0].message
            history.append(message.model_dump(exclude_none=True))
            (call,) = message.tool_calls or []
            assert call.type == "function"
            return call.id

    def run(base_url: str) -> list[str]:
        ids = [top(base_url, 1), top(base_url, 2)]
        vienna_asked, prague_asked = threading.Event(), threading.Event()
        with ThreadPoolExecutor(2) as pool:
            vienna = pool.submit(_child, base_url, tasks[1], vienna_asked, prague_asked)
            vienna_asked.wait(30)
            prague = pool.submit(_child, base_url, tasks[0], prague_asked)
            return [*ids, prague.result(60), vienna.result(60)]

    tops = [[make_tool_calls((f"call_t{n}", "delegate", {"task": tasks[n - 1]}))] for n in (1, 2)]
    children = [  # in first-call order: Vienna's sub-agent, then Prague's
        [make_tool_calls(("call_c", "lookup", {"q": city})), make_text([f"Done {city}."])]
        for city in ("Vienna", "Prague")
    ]
    result = roundtrip([*tops, *children], run)
    assert result.recorded == result.replayed
    assert result.recorded == ["call_t1", "call_t2", "Done Prague.", "Done Vienna."]
    headers = result.headers()
    assert len(headers) == 4
    by_id = {h.id: h for h in headers}
    for header in headers[2:]:
        events = result.events(header.id)
        opening = next(e for e in events if e.type == "user/message").data["content"][0]["text"]
        parent = by_id[header.parent_session or ""]
        parent_call = next(e for e in result.events(parent.id) if e.type == "tool/call")
        assert json.loads(parent_call.data["arguments"])["task"] == opening

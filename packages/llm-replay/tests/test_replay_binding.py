"""Binding concurrent children by the parent call they answer, not by who calls first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_core import Chunk, Delegation, ModelRequest
from dsh_llm_replay import (
    ChunksEntry,
    DelegatedCall,
    ReplayError,
    ReplayHeader,
    ReplayModelClient,
    ReplaySettings,
    SessionScript,
    load_session_scripts,
)

pytestmark = pytest.mark.anyio


def said(text: str) -> ChunksEntry:
    return ChunksEntry(
        (
            {"type": "text-delta", "index": 0, "text": text},
            {"type": "finish", "reason": {"kind": "stop"}},
        )
    )


def parent(*calls: tuple[str, str]) -> SessionScript:
    delegated = tuple(DelegatedCall(call_id, prompt) for call_id, prompt in calls)
    return SessionScript(
        "session.jsonl", ReplayHeader("rec-p", 0), (said("p1"), said("p2")), "go", delegated
    )


def child(n: int, prompt: str, answer: str, parent_id: str = "rec-p") -> SessionScript:
    header = ReplayHeader(f"rec-c{n}", n, 0, parent_id)
    return SessionScript(f"session.{n}.jsonl", header, (said(answer),), prompt)


async def text(client: ReplayModelClient, session: str, via: Delegation | None = None) -> str:
    request = ModelRequest(session_id=session, messages=[], delegation=via)
    chunks: list[Chunk] = [chunk async for chunk in client.stream(request)]
    return "".join(str(c.get("text", "")) for c in chunks if c["type"] == "text-delta")


# Rows: the recorded calls and children, then the live calls in the order they reach the model
# as (live child, call id, prompt), and the answer each live child must get.
CASES = [
    pytest.param(
        [("c1", "say A"), ("c2", "say B")],
        [(1, "say A", "A"), (2, "say B", "B")],
        [("live-b", "c2", "say B"), ("live-a", "c1", "say A")],
        {"live-b": "B", "live-a": "A"},
        id="reverse-order-binds-by-call",
    ),
    pytest.param(
        [("c1", "same"), ("c2", "same")],
        [(1, "same", "first"), (2, "same", "second")],
        [("live-2", "c2", "same"), ("live-1", "c1", "same")],
        {"live-2": "second", "live-1": "first"},
        id="same-prompt-pairs-in-call-order",
    ),
    pytest.param(
        [("c1", "say A"), ("c2", "say B")],
        [(1, "say A", "A"), (2, "say B", "B")],
        [("live-b", "unrecorded", "say B"), ("live-a", "c1", "say A")],
        {"live-b": "B", "live-a": "A"},
        id="unknown-call-id-falls-back-to-the-prompt",
    ),
    pytest.param(
        [],
        [(1, "say A", "A"), (2, "say B", "B")],
        [("live-b", "c2", "say B"), ("live-a", "c1", "say A")],
        {"live-b": "B", "live-a": "A"},
        id="no-recorded-calls-binds-by-prompt",
    ),
    pytest.param(
        [("c1", "say A"), ("c2", "say B")],
        [(1, "say A", "A"), (2, "say B", "B")],
        [("live-x", "c9", "something else"), ("live-y", "c8", "other")],
        {"live-x": "A", "live-y": "B"},
        id="no-match-falls-back-to-first-call-order",
    ),
]


@pytest.mark.parametrize(("calls", "children", "arrivals", "expected"), CASES)
async def test_children_bind_to_the_recorded_child_of_the_same_call(
    calls: list[tuple[str, str]],
    children: list[tuple[int, str, str]],
    arrivals: list[tuple[str, str, str]],
    expected: dict[str, str],
) -> None:
    client = ReplayModelClient([parent(*calls), *(child(*c) for c in children)])
    assert await text(client, "live-p") == "p1"
    got = {
        live: await text(client, live, Delegation("live-p", call_id, prompt))
        for live, call_id, prompt in arrivals
    }
    assert got == expected
    assert await text(client, "live-p") == "p2"
    client.assert_consumed()


async def test_a_child_of_an_unbound_parent_binds_in_first_call_order() -> None:
    client = ReplayModelClient([parent(("c1", "say A")), child(1, "say A", "A")])
    assert await text(client, "live-p") == "p1"
    assert await text(client, "live-c", Delegation("live-unknown", "c1", "say A")) == "A"


async def test_without_delegation_reverse_arrivals_would_bind_wrongly() -> None:
    # Why the request carries the delegation: first-call order alone swaps the children.
    client = ReplayModelClient(
        [parent(("c1", "say A"), ("c2", "say B")), child(1, "say A", "A"), child(2, "say B", "B")]
    )
    await text(client, "live-p")
    assert await text(client, "live-b") == "A"


def _log(path: Path, header: dict[str, Any], events: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(row) for row in [header, *events]) + "\n")
    return path


def test_scripts_keep_their_prompt_and_delegating_calls(tmp_path: Path) -> None:
    finish = {"type": "finish", "reason": {"kind": "stop"}}
    prompt = {"type": "user/message", "data": {"content": [{"type": "text", "text": "go"}]}}
    arguments = json.dumps({"description": "d", "prompt": "say A"})
    primary = _log(
        tmp_path / "session.jsonl",
        {"type": "session", "version": 0, "id": "p", "createdAt": 1},
        [
            prompt,
            {"type": "assistant/chunk", "data": {"turn": 1, "step": 1, "chunk": finish}},
            {
                "type": "tool/call",
                "data": {"callId": "c1", "name": "subagent", "arguments": arguments},
            },
            {"type": "tool/call", "data": {"callId": "c2", "name": "bash", "arguments": "{}"}},
            {"type": "tool/call", "data": {"callId": "c3", "name": "x", "arguments": "not json"}},
        ],
    )
    fork = _log(
        tmp_path / "session.1.jsonl",
        {
            "type": "session",
            "version": 0,
            "id": "k",
            "createdAt": 2,
            "parentSession": "p",
            "seedLength": 1,
        },
        [
            prompt,
            {
                "type": "user/message",
                "data": {"message": {"content": [{"type": "text", "text": "say A"}]}},
            },
            {"type": "assistant/chunk", "data": {"turn": 2, "step": 1, "chunk": finish}},
        ],
    )
    main, kid = load_session_scripts(primary, [fork])
    assert (main.prompt, main.delegated) == ("go", (DelegatedCall("c1", "say A"),))
    assert (kid.prompt, kid.delegated, kid.header.parent_session) == ("say A", (), "p")


def test_the_jitter_setting_is_validated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_SNAPSHOT_FILE", str(tmp_path / "session.jsonl"))
    monkeypatch.setenv("DSH_REPLAY_CHILD_JITTER_MS", "25")
    assert ReplaySettings().child_jitter_ms == 25  # pyright: ignore[reportCallIssue]
    monkeypatch.setenv("DSH_REPLAY_CHILD_JITTER_MS", "-1")
    with pytest.raises(ReplayError, match="DSH_REPLAY_CHILD_JITTER_MS"):
        ReplayModelClient.from_settings()


async def test_jittered_children_still_bind_by_call() -> None:
    client = ReplayModelClient(
        [parent(("c1", "say A"), ("c2", "say B")), child(1, "say A", "A"), child(2, "say B", "B")],
        child_jitter_ms=5,
    )
    assert await text(client, "live-p") == "p1"  # the primary is never delayed
    assert await text(client, "live-b", Delegation("live-p", "c2", "say B")) == "B"
    assert await text(client, "live-a", Delegation("live-p", "c1", "say A")) == "A"

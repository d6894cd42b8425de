"""``SubagentTool`` under the ``current`` loop profile, against upstream's later specs.

Ported from ``head/packages/subagent/tool-subagent/tests/tool-subagent.spec.ts`` (concurrency,
stop-reason mapping), ``subagent/tests/assistant-output.spec.ts`` (final output selection) and
``subagent/src/child-agent.ts`` / ``depth.ts`` (the depth rule). Not applicable: background
and continuable runs, providers and their capabilities, tool filters, personas (we have one
in-process backend per tool and foreground runs only).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    Chunk,
    CreateOptions,
    Delegation,
    Event,
    HangEntry,
    LoopProfile,
    ModelRequest,
    Session,
    SessionMeta,
    SubagentRequest,
    SubagentTool,
)
from dsh_core._subagent_tool import final_assistant_text
from dsh_core.testing import SCRIPTED_REQUEST_CONFIG, InMemorySessionStore, ScriptedModel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class SpawnBackend:
    """A spawn-like backend (tool ``subagent``): a fresh child stamped with its depth."""

    @property
    def tool_name(self) -> str:
        return "subagent"

    @property
    def tool_description(self) -> str:
        return "delegate"

    def child_options(self, parent: Session, request: SubagentRequest, depth: int) -> CreateOptions:
        meta = SessionMeta(
            cwd=parent.header.cwd,
            parent_session=parent.id,
            origin="subagent",
            delegation_depth=depth,
        )
        return CreateOptions(meta=meta)


def _text(text: str, finish: str = "stop") -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": finish}},  # type: ignore[typeddict-item]
    ]


def _delegations(*calls: tuple[str, str]) -> list[Chunk]:
    chunks: list[Chunk] = []
    for index, (call_id, prompt) in enumerate(calls):
        arguments = json.dumps({"description": f"task {index}", "prompt": prompt})
        block = {"type": "tool-call", "id": call_id, "name": "subagent", "arguments": arguments}
        chunks.append({"type": "block-start", "index": index, "blockType": "tool-call"})
        chunks.append({"type": "block-end", "index": index, "block": block})  # type: ignore[typeddict-item]
    chunks.append({"type": "finish", "reason": {"kind": "tool-calls"}})
    return chunks


def _setup(
    scripts: list[list[Any]], *, depth: int | None = None, **config: Any
) -> tuple[Agent, InMemorySessionStore, Session, ScriptedModel]:
    store = InMemorySessionStore()
    model = ScriptedModel(scripts)
    agent = Agent(model, store, [SubagentTool(SpawnBackend())], AgentConfig(**config))
    parent = store.create(CreateOptions(meta=SessionMeta(cwd="/w", delegation_depth=depth)))
    return agent, store, parent, model


def _result_texts(session: Session) -> list[tuple[str, bool]]:
    return [
        (e.data["content"][0]["text"], e.data["isError"])
        for e in session.events
        if e.type == "tool/result"
    ]


# --- the depth rule (child-agent.ts resolveChildDepth, tool-subagent maxDepth default 3) -------


@pytest.mark.parametrize(
    ("profile", "parent_depth", "limit", "error"),
    [
        ("current", None, None, None),
        ("current", 2, None, None),  # a grandchild's child is depth 3: allowed by default
        ("current", 3, None, "Error: subagent depth 4 exceeds maxDepth 3"),
        ("current", None, 0, "Error: subagent depth 1 exceeds maxDepth 0"),  # 0 forbids it
        # the depth-two child's delegation under a cap of 2 (snapshots/sdk/subagent-depth-limit)
        ("current", 2, 2, "Error: subagent depth 3 exceeds maxDepth 2"),
        # a child spawning at depth two under a cap of 1 (subagent-spawn.spec.ts, past maxDepth)
        ("current", 1, 1, "Error: subagent depth 2 exceeds maxDepth 1"),
        ("current", 1, 2, None),  # at the cap is allowed (childDepth > maxDepth refuses)
        ("june", None, None, None),
        ("june", 1, None, "delegation depth 2 exceeds the maximum 1"),
        ("june", 1, 2, None),
    ],
)
async def test_the_depth_rule(
    profile: LoopProfile, parent_depth: int | None, limit: int | None, error: str | None
) -> None:
    agent, store, parent, _ = _setup(
        [[_delegations(("c1", "say CHILD")), _text("done")], [_text("CHILD")]],
        depth=parent_depth,
        profile=profile,
        max_delegation_depth=limit,
    )
    await agent.run_turn(parent, "go")
    expected = ("CHILD", False) if error is None else (error, True)
    assert _result_texts(parent) == [expected]
    children = [h for h in store.list_sessions() if h.id != parent.id]
    assert len(children) == (0 if error else 1)
    if children:
        assert children[0].delegation_depth == (parent_depth or 0) + 1


# tool-subagent.spec.ts "rejects maxDepth=$label when the plugin loads" / "validates maxDepth when
# apply() is invoked directly": depth.ts assertSubagentMaxDepth, in its words. Negative zero is a
# float here (refused as one); Python's int -0 is 0, a valid cap.
@pytest.mark.parametrize(
    "value",
    ["1", float("nan"), float("inf"), float("-inf"), -1, 1.5, -0.0, 2**53, True],
    ids=["string", "nan", "inf", "-inf", "negative", "fractional", "-0", "unsafe", "bool"],
)
def test_an_invalid_depth_cap_is_refused_when_the_agent_is_built(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^subagent maxDepth must be a non-negative safe integer"):
        _setup([], max_delegation_depth=value)


def test_the_largest_safe_depth_cap_is_accepted() -> None:
    agent, *_ = _setup([], max_delegation_depth=2**53 - 1)
    assert agent.config.delegation_depth_limit == 2**53 - 1


async def test_the_depth_comes_from_the_persisted_header_across_levels() -> None:
    """depth.ts: the persisted header is the monotone floor, so each level counts from its
    parent's header, and the depth-two grandchild's own delegation is the one refused."""
    parent_script = [_delegations(("p1", "delegate")), _text("PARENT_DONE")]
    child_script = [_delegations(("c1", "delegate again")), _text("CHILD_DONE")]
    grand_script = [_delegations(("g1", "too deep")), _text("GRANDCHILD_DONE")]
    agent, store, parent, _ = _setup(
        [parent_script, child_script, grand_script], max_delegation_depth=2
    )
    await agent.run_turn(parent, "go")
    headers = {h.id: h for h in store.list_sessions()}
    depths = sorted(h.delegation_depth or 0 for h in headers.values())
    assert depths == [0, 1, 2]
    grand = next(h for h in headers.values() if h.delegation_depth == 2)
    grand_results = [
        (e.data["content"][0]["text"], e.data["isError"])
        for e in store.load(grand.id).events
        if e.type == "tool/result"
    ]
    assert grand_results == [("Error: subagent depth 3 exceeds maxDepth 2", True)]
    assert _result_texts(parent) == [("CHILD_DONE", False)]


# --- stop reasons (tool-subagent.spec.ts "maps stop reason … to an isError result") -----------


@pytest.mark.parametrize(
    ("child_script", "expected"),
    [
        ([_text("all of it")], ("all of it", False)),
        (
            [_text("half an ans", "max-tokens")],
            (
                "Error: subagent run hit its token limit before finishing\n"
                "Partial output before the run ended:\nhalf an ans",
                True,
            ),
        ),
        # No partial output: the headline alone (the failed attempt streamed only usage).
        (
            [[{"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 0}}]],
            (
                "Error: subagent run failed",
                True,
            ),
        ),
    ],
)
async def test_a_childs_stop_reason_maps_to_the_result(
    child_script: list[Any], expected: tuple[str, bool]
) -> None:
    agent, _, parent, _ = _setup([[_delegations(("c1", "answer")), _text("done")], child_script])
    outcome = await agent.run_turn(parent, "go")
    assert outcome.kind == "completed"
    assert _result_texts(parent) == [expected]


# --- concurrency (tool-subagent.spec.ts "overlaps sibling foreground delegations") ------------


class _BothStarted:
    """A model whose children each wait until both have called: hidden serialisation of
    sibling delegations would deadlock (caught by a timeout) instead of passing silently."""

    def __init__(self, parent_script: list[list[Chunk]]) -> None:
        self.parent_script = list(parent_script)
        self.parent_id: str | None = None
        self.children: dict[str, str] = {}
        self.both = asyncio.Event()
        self.requests: list[ModelRequest] = []
        self.request_config = SCRIPTED_REQUEST_CONFIG

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        if self.parent_id is None:
            self.parent_id = request.session_id
        if request.session_id == self.parent_id:
            for chunk in self.parent_script.pop(0):
                yield chunk
            return
        assert request.delegation is not None
        self.children[request.session_id] = request.delegation.prompt
        if len(self.children) == 2:
            self.both.set()
        await asyncio.wait_for(self.both.wait(), timeout=5)
        for chunk in _text(request.delegation.prompt.upper()):
            yield chunk

    async def aclose(self) -> None:
        return None


async def test_sibling_delegations_overlap_and_carry_their_call() -> None:
    model = _BothStarted([_delegations(("c1", "first"), ("c2", "second")), _text("done")])
    store = InMemorySessionStore()
    agent = Agent(model, store, [SubagentTool(SpawnBackend())], AgentConfig())
    parent = store.create(CreateOptions(meta=SessionMeta(cwd="/w")))
    outcome = await agent.run_turn(parent, "go")
    assert outcome.final_text == "done"
    assert _result_texts(parent) == [("FIRST", False), ("SECOND", False)]
    delegations = {r.delegation for r in model.requests if r.session_id != parent.id}
    assert delegations == {
        Delegation(parent.id, "c1", "first"),
        Delegation(parent.id, "c2", "second"),
    }
    assert {r.delegation for r in model.requests if r.session_id == parent.id} == {None}


async def test_cancelling_the_parent_aborts_every_concurrent_child() -> None:
    agent, store, parent, model = _setup(
        [[_delegations(("c1", "one"), ("c2", "two"))], [HangEntry()], [HangEntry()]]
    )
    task = asyncio.create_task(agent.run_turn(parent, "go"))
    for _ in range(10_000):
        if len(model.requests) == 3:  # both children are streaming
            break
        await asyncio.sleep(0)
    task.cancel()
    outcome = await task
    assert (outcome.kind, task.cancelled()) == ("aborted", False)
    assert _result_texts(parent) == [("cancelled", True), ("cancelled", True)]
    assert parent.events[-1].data["reason"] == {"kind": "aborted", "reason": "session/cancel"}
    children = [store.load(h.id) for h in store.list_sessions() if h.id != parent.id]
    assert len(children) == 2
    for child in children:
        assert child.events[-1].data["reason"] == {"kind": "aborted", "reason": "session/cancel"}
        # Each child's log was closed: it can be resumed for writing.
        store.resume(child.header.id).close()


# --- final output selection (assistant-output.spec.ts) ----------------------------------------


def _message(content: list[dict[str, Any]], *, later_shape: bool = False) -> Event:
    data = {"message": {"content": content}} if later_shape else {"content": content}
    return Event("assistant/message", 0, 0, data)


def _delta(kind: str, text: str) -> Event:
    return Event("assistant/chunk", 0, 0, {"chunk": {"type": kind, "index": 0, "text": text}})


def _tool_result(text: str) -> Event:
    return Event("tool/result", 0, 0, {"callId": "c", "content": [{"type": "text", "text": text}]})


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # The last non-empty message wins over a later empty usage-only one.
        (
            [
                _message([{"type": "text", "text": "step one"}]),
                _message([{"type": "text", "text": "step two"}]),
                _message([]),
            ],
            "step two",
        ),
        # A non-empty message wins over text streamed before and after it.
        (
            [
                _delta("text-delta", "earlier partial"),
                _message([{"type": "text", "text": "complete answer"}], later_shape=True),
                _delta("text-delta", "later partial"),
                _message([]),
            ],
            "complete answer",
        ),
        # Textless content is still a non-empty message (its text is empty).
        (
            [
                _delta("text-delta", "streamed text"),
                _message([{"type": "reasoning", "text": "complete reasoning"}]),
                _delta("text-delta", "later partial"),
            ],
            "",
        ),
        # Fallback: text deltas only, never reasoning or tool results.
        (
            [
                _delta("reasoning-delta", "thinking"),
                _delta("text-delta", "partial "),
                _tool_result("tool output"),
                _delta("text-delta", "answer"),
                _message([]),
            ],
            "partial answer",
        ),
        ([], ""),
        ([_delta("reasoning-delta", "thinking"), _message([])], ""),
    ],
)
def test_final_assistant_output(events: list[Event], expected: str) -> None:
    assert final_assistant_text(events) == expected

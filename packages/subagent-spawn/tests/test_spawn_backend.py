"""The spawn backend with core's agent: June's subagent recordings replayed in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    BashTool,
    CreateOptions,
    Event,
    SessionLog,
    SessionMeta,
    SubagentRequest,
    SubagentTool,
    derive_replay_script,
    read_log_text,
)
from dsh_core.testing import (
    InMemorySessionStore,
    ScriptedModel,
    corpus_unavailable,
    normalized_rows,
    upstream_corpus,
)
from dsh_subagent_spawn import SpawnBackend

pytestmark = pytest.mark.anyio

_CORPUS = upstream_corpus(__file__)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _fixture(scenario: str, name: str) -> SessionLog:
    if _CORPUS is None:
        corpus_unavailable("no upstream corpus found (set DSH_UPSTREAM_CORPUS)")
    path = _CORPUS / "june" / scenario / name
    if not path.is_file():
        corpus_unavailable(f"upstream corpus file {path} is absent (set DSH_UPSTREAM_CORPUS)")
    return read_log_text(path.read_text(encoding="utf-8"), str(path))


async def _replay(scenario: str, children: int, tmp_path: Path) -> None:
    primary = _fixture(scenario, "session.jsonl")
    child_logs = [_fixture(scenario, f"session.{n}.jsonl") for n in range(1, children + 1)]
    store = InMemorySessionStore()
    scripts = [
        derive_replay_script(primary.events),
        *(derive_replay_script(c.events) for c in child_logs),
    ]
    model = ScriptedModel(scripts)
    tools = [BashTool(), SubagentTool(SpawnBackend())]
    agent = Agent(model, store, tools, AgentConfig(profile="june"))  # June's logs: no header
    parent = store.create(CreateOptions(meta=SessionMeta(cwd=str(tmp_path))))
    for prompt in (
        e.data["content"][0]["text"] for e in primary.events if e.type == "user/message"
    ):
        outcome = await agent.run_turn(parent, prompt)
        assert outcome.kind == "completed"
    parent.close()
    model.assert_consumed()

    ours = store.load(parent.id)
    assert normalized_rows(ours.header, ours.events) == normalized_rows(
        primary.header, primary.events
    )
    headers = [h for h in store.list_sessions() if h.id != parent.id]
    assert len(headers) == children
    for header, expected in zip(headers, child_logs, strict=True):
        # Children carry origin and delegationDepth (DESIGN §6); June's headers predate them.
        assert (header.origin, header.delegation_depth) == ("subagent", 1)
        assert (header.parent_session, header.cwd, header.seed_length) == (
            parent.id,
            str(tmp_path),
            None,
        )
        child = store.load(header.id)
        got = normalized_rows(header, child.events)
        del got[0]["origin"], got[0]["delegationDepth"]
        assert got == normalized_rows(expected.header, expected.events)


@pytest.mark.corpus
async def test_subagent_spawn_matches_june(tmp_path: Path) -> None:
    await _replay("subagent-spawn", 1, tmp_path)


@pytest.mark.corpus
async def test_subagent_multi_matches_june(tmp_path: Path) -> None:
    await _replay("subagent-multi", 2, tmp_path)


def test_child_options_start_empty_and_name_the_parent(tmp_path: Path) -> None:
    store = InMemorySessionStore()
    parent = store.create(CreateOptions(meta=SessionMeta(cwd=str(tmp_path))))
    parent.add(Event("turn/start", 0, 0, {"turn": 1}))
    parent.add(Event("turn/end", 1, 0, {"turn": 1, "reason": {"kind": "completed"}}))
    backend = SpawnBackend()
    options = backend.child_options(parent, SubagentRequest("d", "p"), 2)
    assert options.seed == ()
    assert options.session_id is None
    assert options.meta == SessionMeta(
        cwd=str(tmp_path), parent_session=parent.id, origin="subagent", delegation_depth=2
    )
    assert backend.tool_name == "subagent"
    assert "empty conversation" in backend.tool_description
    spec = SubagentTool(backend).spec
    assert spec["name"] == "subagent"

"""The agent, fed the chunks of the upstream June recordings, writes the same logs.

Each test plays the ``assistant/chunk`` groups of a June ``session.jsonl`` through
``ScriptedModel`` and compares the produced log with the recording after normalising
``time``/``createdAt`` (→ 0), session ids and the cwd. The corpus is read from
``DSH_UPSTREAM_CORPUS`` (default ``../shared/upstream-corpus`` beside the checkout).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    BashTool,
    CreateOptions,
    Event,
    HangEntry,
    Session,
    SessionLog,
    SessionMeta,
    ThrowEntry,
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

pytestmark = [pytest.mark.anyio, pytest.mark.corpus]

_CORPUS = upstream_corpus(__file__)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _fixture(scenario: str, name: str = "session.jsonl") -> SessionLog:
    if _CORPUS is None:
        corpus_unavailable("no upstream corpus found (set DSH_UPSTREAM_CORPUS)")
    path = _CORPUS / "june" / scenario / name
    if not path.is_file():
        corpus_unavailable(f"upstream corpus file {path} is absent (set DSH_UPSTREAM_CORPUS)")
    return read_log_text(path.read_text(encoding="utf-8"), str(path))


def _prompts(log: SessionLog) -> list[str]:
    return [e.data["content"][0]["text"] for e in log.events if e.type == "user/message"]


async def _play(
    scenario: str, tmp_path: Path, script: list[Any] | None = None
) -> tuple[SessionLog, InMemorySessionStore, Session, ScriptedModel]:
    """Run every prompt of the recording against its own chunks; return the parts."""
    log = _fixture(scenario)
    store = InMemorySessionStore()
    model = ScriptedModel([derive_replay_script(log.events) if script is None else script])
    # June's loop: its logs have no request/header
    agent = Agent(model, store, [BashTool()], AgentConfig(profile="june"))
    session = store.create(CreateOptions(meta=SessionMeta(cwd=str(tmp_path))))
    for prompt in _prompts(log):
        await agent.run_turn(session, prompt)
    session.close()
    return log, store, session, model


def _assert_same(log: SessionLog, store: InMemorySessionStore, session: Session) -> None:
    ours = store.load(session.id)
    assert normalized_rows(ours.header, ours.events) == normalized_rows(log.header, log.events)


async def test_text_turn_matches_june(tmp_path: Path) -> None:
    log, store, session, model = await _play("text-turn", tmp_path)
    _assert_same(log, store, session)
    model.assert_consumed()
    assert [m["role"] for m in model.requests[0].messages] == ["user"]
    assert model.requests[0].session_id == session.id
    assert [t["name"] for t in model.requests[0].tools] == ["bash"]


async def test_tool_call_turn_runs_real_bash_and_matches_june(tmp_path: Path) -> None:
    log, store, session, model = await _play("tool-call-turn", tmp_path)
    _assert_same(log, store, session)
    model.assert_consumed()
    second = model.requests[1]
    assert [m["role"] for m in second.messages] == ["user", "assistant", "tool"]
    assert (second.turn, second.step) == (1, 2)


async def test_multi_turn_matches_june(tmp_path: Path) -> None:
    log, store, session, model = await _play("multi-turn", tmp_path)
    _assert_same(log, store, session)
    model.assert_consumed()
    assert [m["role"] for m in model.requests[1].messages] == ["user", "assistant", "user"]
    assert model.requests[1].turn == 2


async def test_error_finish_matches_june(tmp_path: Path) -> None:
    error = ThrowEntry((), "simulated provider error (HTTP 401)", "AUTH", 401)
    log, store, session, _ = await _play("error-finish", tmp_path, [error])
    _assert_same(log, store, session)


async def test_cancel_matches_june(tmp_path: Path) -> None:
    log = _fixture("cancel")
    store = InMemorySessionStore()
    agent = Agent(ScriptedModel([[HangEntry()]]), store, [BashTool()], AgentConfig(profile="june"))
    session = store.create(CreateOptions(meta=SessionMeta(cwd=str(tmp_path))))
    hanging = asyncio.Event()

    def listener(event: Event) -> None:
        if event.type == "assistant/chunk" and event.data["chunk"].get("text") == "partial":
            hanging.set()

    task = asyncio.create_task(agent.run_turn(session, _prompts(log)[0], listener=listener))
    await hanging.wait()
    task.cancel()
    outcome = await task
    assert not task.cancelled()
    assert outcome.kind == "aborted"
    assert asyncio.current_task() is not None
    session.close()
    _assert_same(log, store, session)

"""The agent logs ``request/header`` (upstream's later shape) when the header changes."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    BashTool,
    CreateOptions,
    Event,
    ModelRequest,
    RequestConfig,
    Session,
    SessionMeta,
    completed_turn_prefix,
    header_change,
    latest_request_header,
    request_header,
)
from dsh_core.testing import (
    SCRIPTED_REQUEST_CONFIG,
    InMemorySessionStore,
    ScriptedModel,
    text_chunks,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _headers(session: Session) -> list[dict[str, Any]]:
    return [e.data for e in session.events if e.type == "request/header"]


async def test_the_first_call_logs_config_system_and_tools_before_its_chunks() -> None:
    store = InMemorySessionStore()
    config: RequestConfig = {"provider": "deepseek", "model": "m1", "maxTokens": 64}
    model = ScriptedModel([[text_chunks("a"), text_chunks("b")]], request_config=config)
    bash = BashTool()
    agent = Agent(model, store, [bash], AgentConfig(system_prompt="be brief"))
    session = store.create(CreateOptions())
    await agent.run_turn(session, "one")
    await agent.run_turn(session, "two")
    assert _headers(session) == [
        {
            "header": {"config": config, "system": "be brief", "tools": [dict(bash.spec)]},
            "reason": "initial",
        }
    ]
    types = [e.type for e in session.events]
    assert types[2:5] == ["step/start", "request/header", "assistant/chunk"]


async def test_a_changed_system_prompt_is_logged_again_as_a_change() -> None:
    store = InMemorySessionStore()
    model = ScriptedModel([[text_chunks("a"), text_chunks("b"), text_chunks("c")]])
    session = store.create(CreateOptions())
    await Agent(model, store, [], AgentConfig(system_prompt="v1")).run_turn(session, "one")
    await Agent(model, store, [], AgentConfig(system_prompt="v2")).run_turn(session, "two")
    await Agent(model, store, [], AgentConfig(system_prompt="v2")).run_turn(session, "three")
    assert [(h["header"]["system"], h["reason"]) for h in _headers(session)] == [
        ("v1", "initial"),
        ("v2", "change"),
    ]
    # An empty prompt and no tools are omitted, as upstream's canonical header omits them.
    assert "tools" not in _headers(session)[0]["header"]
    assert _headers(session)[0]["header"]["config"] == SCRIPTED_REQUEST_CONFIG


async def test_the_june_profile_logs_no_header() -> None:
    store = InMemorySessionStore()
    agent = Agent(ScriptedModel([[text_chunks("a")]]), store, [], AgentConfig(profile="june"))
    session = store.create(CreateOptions())
    await agent.run_turn(session, "one")
    assert _headers(session) == []


async def test_a_fork_child_logs_its_own_header_after_a_seed_that_has_one() -> None:
    store = InMemorySessionStore()
    model = ScriptedModel([[text_chunks("a")], [text_chunks("b")]])
    agent = Agent(model, store, [])
    parent = store.create(CreateOptions())
    await agent.run_turn(parent, "one")
    seed = completed_turn_prefix(parent.events)
    child = store.create(
        CreateOptions(seed=seed, meta=SessionMeta(parent_session=parent.id, seed_length=len(seed)))
    )
    await agent.run_turn(child, "two")
    own = child.events[len(seed) :]
    assert [e.data["reason"] for e in own if e.type == "request/header"] == ["resume"]


def test_header_change_reads_the_log() -> None:
    header = request_header(SCRIPTED_REQUEST_CONFIG, ModelRequest("s", [], system="x"))
    logged = Event("request/header", 0, 0, {"header": header, "reason": "initial"})
    assert header_change([], 0, header) == "initial"
    assert header_change([logged], 0, header) is None
    assert header_change([logged], 1, header) == "resume"
    other = request_header(SCRIPTED_REQUEST_CONFIG, ModelRequest("s", [], system="y"))
    assert header_change([logged], 0, other) == "change"
    assert latest_request_header([logged]) == header
    assert latest_request_header([Event("request/header", 0, 0, {"header": "x"})]) is None

"""Request drift: replay compares each live request's header with the recorded one.

Recordings are made by the real agent loop (``current`` profile, which logs
``request/header``) against ``ScriptedModel``, written as JSONL, loaded as scripts and
replayed by a second agent whose prompt, tool or model differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    CreateOptions,
    LoopProfile,
    RequestConfig,
    SessionMeta,
    Tool,
    ToolContext,
    ToolOutcome,
    ToolSpec,
    render_log,
)
from dsh_core.testing import (
    InMemorySessionStore,
    ScriptedModel,
    corpus_unavailable,
    text_chunks,
    upstream_corpus,
)
from dsh_llm_replay import (
    NotConsumedError,
    ReplayModelClient,
    RequestDriftError,
    first_header_difference,
    load_session_scripts,
    parse_session_log,
    recorded_headers,
)

pytestmark = pytest.mark.anyio

_ROUTE: RequestConfig = {
    "provider": "deepseek",
    "model": "deepseek-flash",
    "reasoningEffort": "high",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Shell:
    """A tool whose schema has a nested description, like bash's ``command``."""

    def __init__(self, command_description: str = "The command to run.") -> None:
        self.command_description = command_description

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="shell",
            description="Run a command.",
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": self.command_description}
                },
            },
        )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        return ToolOutcome("ran", False)


async def _record(
    tmp_path: Path,
    *,
    profile: LoopProfile = "current",
    system: str = "You are terse.",
    tools: Sequence[Tool] = (),
) -> Path:
    store = InMemorySessionStore()
    model = ScriptedModel([[text_chunks("one"), text_chunks("two")]], request_config=_ROUTE)
    agent = Agent(
        model,
        store,
        list(tools) or [_Shell()],
        AgentConfig(system_prompt=system, profile=profile),
    )
    session = store.create(CreateOptions(meta=SessionMeta(cwd=str(tmp_path))))
    await agent.run_turn(session, "first")
    await agent.run_turn(session, "second")
    session.close()
    log = store.load(session.id)
    path = tmp_path / "session.jsonl"
    path.write_text(render_log(log.header, log.events), encoding="utf-8")
    return path


async def _replay(
    recording: Path,
    *,
    system: str = "You are terse.",
    tools: Sequence[Tool] = (),
    route: RequestConfig | None = _ROUTE,
    check_headers: bool = True,
) -> ReplayModelClient:
    client = ReplayModelClient(
        load_session_scripts(recording), request_config=route, check_headers=check_headers
    )
    store = InMemorySessionStore()
    agent = Agent(client, store, list(tools) or [_Shell()], AgentConfig(system_prompt=system))
    session = store.create(CreateOptions())
    first = await agent.run_turn(session, "first")
    second = await agent.run_turn(session, "second")
    # A drifted call is still answered: the run goes on and shows what else changed.
    assert (first.final_text, second.final_text) == ("one", "two")
    return client


def _drift(client: ReplayModelClient) -> RequestDriftError:
    drifts = [e for e in client.errors if isinstance(e, RequestDriftError)]
    assert len(drifts) == 1, client.errors  # reported once per session, at its first call
    return drifts[0]


async def test_an_unchanged_agent_replays_clean(tmp_path: Path) -> None:
    client = await _replay(await _record(tmp_path))
    assert client.errors == ()
    client.assert_consumed()


async def test_a_changed_tool_description_fails_at_its_path(tmp_path: Path) -> None:
    recording = await _record(tmp_path)
    client = await _replay(recording, tools=[_Shell("The shell command to execute.")])
    drift = _drift(client)
    assert drift.difference.path == "tools[shell].parameters.properties.command.description"
    assert (drift.turn, drift.step) == (1, 1)
    assert drift.source == str(recording)
    text = str(drift)
    assert 'expected "The command to run.", actual "The shell command to execute."' in text
    assert "turn 1, step 1" in text
    assert str(recording) in text
    with pytest.raises(NotConsumedError, match=r"request drift .*tools\[shell\]"):
        client.assert_consumed()
    assert client.report().errors[0].kind == "request-drift"


async def test_a_changed_system_prompt_fails_at_system(tmp_path: Path) -> None:
    client = await _replay(await _record(tmp_path), system="You are verbose.")
    drift = _drift(client)
    assert drift.difference.path == "system"
    assert (drift.difference.expected, drift.difference.actual) == (
        '"You are terse."',
        '"You are verbose."',
    )


async def test_a_changed_model_fails_at_config_model(tmp_path: Path) -> None:
    route: RequestConfig = {**_ROUTE, "model": "deepseek-v4-pro"}
    client = await _replay(await _record(tmp_path), route=route)
    assert str(_drift(client).difference) == (
        'config.model: expected "deepseek-flash", actual "deepseek-v4-pro"'
    )


async def test_without_a_live_route_only_prompt_and_tools_are_compared(tmp_path: Path) -> None:
    client = await _replay(await _record(tmp_path), route=None)
    assert client.errors == ()
    assert client.request_config == {"provider": "replay", "model": "replay"}


async def test_refresh_accepts_a_new_header(tmp_path: Path) -> None:
    client = await _replay(await _record(tmp_path), system="new", check_headers=False)
    assert client.errors == ()
    client.assert_consumed()


async def test_a_june_era_recording_is_not_checked_and_says_so(tmp_path: Path) -> None:
    recording = await _record(tmp_path, profile="june")
    (script,) = load_session_scripts(recording)
    assert script.request_headers.status == "not-recorded"
    assert script.request_headers.note == "request header: not recorded (june-era), not checked"
    client = await _replay(recording, system="anything else")
    assert client.errors == ()


def test_upstream_head_logs_are_read_as_normalised_and_not_checked() -> None:
    corpus = upstream_corpus(__file__)
    if corpus is None:
        corpus_unavailable("no upstream corpus found (set DSH_UPSTREAM_CORPUS)")
    logs = sorted((corpus / "head").glob("*/session*.jsonl"))
    statuses = {
        path.parent.name: recorded_headers(
            parse_session_log(path.read_text(encoding="utf-8"), str(path))
        ).status
        for path in logs
    }
    with_header = [n for n, s in statuses.items() if s != "not-recorded"]
    assert len(with_header) > 50  # the head corpus logs request/header almost everywhere
    assert {statuses[n] for n in with_header} == {"normalised"}


def test_first_difference_names_missing_extra_and_reordered_tools() -> None:
    a: dict[str, Any] = {"name": "a", "description": "A", "parameters": {}}
    b: dict[str, Any] = {"name": "b", "description": "B", "parameters": {}}
    config = {"provider": "p", "model": "m"}
    assert first_header_difference({"config": config}, {"config": config}) is None
    missing = first_header_difference({"tools": [a, b]}, {"tools": [a]})
    assert str(missing) == "tools[b]: expected a tool named b, actual no such tool"
    extra = first_header_difference({"tools": [a]}, {"tools": [a, b]})
    assert str(extra) == "tools[b]: expected no such tool, actual a tool named b"
    order = first_header_difference({"tools": [a, b]}, {"tools": [b, a]})
    assert str(order) == "tools: expected the order a, b, actual the order b, a"
    absent = first_header_difference({"config": config}, {"config": config, "system": "s"})
    assert str(absent) == 'system: expected (absent), actual "s"'
    # config comes first, whatever else differs too
    both = first_header_difference(
        {"config": config, "system": "x"}, {"config": {**config, "maxTokens": 5}, "system": "y"}
    )
    assert str(both) == "config.maxTokens: expected (absent), actual 5"


def test_a_long_prompt_is_shown_around_its_first_difference() -> None:
    before = "x" * 500 + "old tail"
    after = "x" * 500 + "new tail"
    found = first_header_difference({"system": before}, {"system": after})
    assert found is not None
    assert found.expected.endswith('xold tail" (char 500)')
    assert found.expected.startswith("…")
    assert found.actual.endswith('xnew tail" (char 500)')
    assert len(found.expected) < 140


async def test_headers_by_call_number_and_openai_shaped_tools(tmp_path: Path) -> None:
    (script,) = load_session_scripts(await _record(tmp_path))
    headers = script.request_headers
    assert headers.for_call(1) is headers.for_call(2) is headers.at(2, 1)
    assert headers.for_call(0) is None
    assert headers.for_call(3) is None

    def wire(description: str) -> dict[str, Any]:
        parameters = {"type": "object", "properties": {"q": {"description": description}}}
        return {"type": "function", "function": {"name": "find", "parameters": parameters}}

    found = first_header_difference({"tools": [wire("old")]}, {"tools": [wire("new")]})
    assert str(found) == (
        'tools[find].function.parameters.properties.q.description: expected "old", actual "new"'
    )

"""The op registry: an op is one registration, and every table derives from it.

A test's own op is registered once (its model, its driver, whether it prompts) and is then
accepted by the strict ``input.json``, present in the schema, unknown to the needs check,
counted by ``expect:`` when it prompts, and driven against a small scripted ACP peer.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

import dsh_snapshot
from dsh_snapshot import OPS, ScenarioAgent, ScenarioError, StepDriver, StrictStep, load_scenario
from dsh_snapshot._agent import AgentError
from dsh_snapshot._needs import step_needs
from dsh_snapshot._scenario import Step
from dsh_snapshot._steps import OpRegistry

# Answers initialize and session/new (a new id each time); logs every line it reads.
_PEER = textwrap.dedent(
    """
    import json, sys

    log = open(sys.argv[1], "a")
    opened = 0
    for line in sys.stdin:
        log.write(line)
        log.flush()
        frame = json.loads(line)
        answer = {"jsonrpc": "2.0", "id": frame.get("id")}
        if frame.get("method") == "initialize":
            answer["result"] = {"protocolVersion": 1}
        elif frame.get("method") == "session/new":
            opened += 1
            answer["result"] = {"sessionId": f"s{opened}"}
        else:
            continue
        sys.stdout.write(json.dumps(answer) + "\\n")
        sys.stdout.flush()
    """
)


class NewSessionsStep(StrictStep):
    """``newSessions``: open ``count`` sessions in a row."""

    op: Literal["newSessions"]
    count: int = 2


def _new_sessions(d: StepDriver, step: NewSessionsStep) -> None:
    for _ in range(step.count):
        d.acp.new_session(d.cwd)


class ShoutStep(StrictStep):
    """``shout``: a prompting op (never driven here)."""

    op: Literal["shout"]
    text: str


def _never(d: StepDriver, step: ShoutStep) -> None:
    raise AssertionError("not driven in these tests")


@pytest.fixture
def own_ops() -> Iterator[None]:
    """The test's ops, registered for the test only."""
    OPS.register(NewSessionsStep, _new_sessions)
    OPS.register(ShoutStep, _never, prompts=True)
    try:
        yield
    finally:
        OPS.unregister("newSessions")
        OPS.unregister("shout")


def _ours(tmp_path: Path, steps: list[dict[str, Any]], meta: str = "") -> Path:
    folder = tmp_path / "sdk" / "own-op"
    folder.mkdir(parents=True)
    (folder / "snapshot.yml").write_text(
        f"version: 1\nprofile: sdk\nrecording: scripted\n{meta}", encoding="utf-8"
    )
    (folder / "input.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    return folder


_STEPS: list[dict[str, Any]] = [
    {"op": "initialize"},
    {"op": "newSessions", "count": 3},
    {"op": "shout", "text": "hello"},
]


def test_an_op_is_one_registration(tmp_path: Path, own_ops: None) -> None:
    # the strict input.json takes it (and refuses a field it does not declare)
    scenario = load_scenario(_ours(tmp_path, _STEPS))
    assert [s.op for s in scenario.steps] == ["initialize", "newSessions", "shout"]
    bad = _ours(tmp_path / "bad", [{"op": "newSessions", "cuont": 3}])
    with pytest.raises(ScenarioError) as err:
        load_scenario(bad)
    assert err.value.field == "steps.0.cuont"
    # the schema lists it
    schema = json.dumps(OPS.input_document().model_json_schema())
    assert '"const": "newSessions"' in schema
    assert '"const": "shout"' in schema
    # the needs check knows it, with its fields
    assert step_needs(_STEPS) == []
    assert step_needs([{"op": "newSessions", "size": 1}]) == ["op newSessions with size"]
    # expect: counts a prompting op as a prompt: shout is prompt 1, and there is no prompt 2
    meta = "expect:\n  - prompt: {}\n    message: hi\n"
    assert load_scenario(_ours(tmp_path / "one", _STEPS, meta.format(1))).meta is not None
    with pytest.raises(ScenarioError, match=r"prompt 2 does not exist: input\.json has 1 prompt"):
        load_scenario(_ours(tmp_path / "two", _STEPS, meta.format(2)))
    assert OPS.prompt_ops >= {"prompt", "shout"}
    assert "newSessions" not in OPS.prompt_ops


def test_a_registered_op_is_driven(
    tmp_path: Path, own_ops: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, received = tmp_path / "peer.py", tmp_path / "received.jsonl"
    script.write_text(_PEER, encoding="utf-8")
    monkeypatch.setattr(
        "dsh_snapshot._agent.agent_command", lambda: [sys.executable, str(script), str(received)]
    )
    with ScenarioAgent(tmp_path, {"PATH": "/usr/bin:/bin"}, timeout=30) as agent:
        for step in _STEPS[:2]:
            agent.run_step(Step.model_validate(step))
        assert agent.finish() == 0
    assert agent.session_ids == ["s1", "s2", "s3"]
    methods = [json.loads(line)["method"] for line in received.read_text().splitlines()]
    assert methods == ["initialize", "session/new", "session/new", "session/new"]


def test_once_unregistered_the_op_is_a_need_again(tmp_path: Path) -> None:
    OPS.register(NewSessionsStep, _new_sessions)
    OPS.unregister("newSessions")
    assert step_needs(_STEPS[:2]) == ["op newSessions"]
    assert "newSessions" not in json.dumps(OPS.input_document().model_json_schema())
    with pytest.raises(ScenarioError) as err:
        load_scenario(_ours(tmp_path, _STEPS[:2]))
    assert err.value.field == "steps.1.op"


class _NoLiteral(StrictStep):
    op: str


class _TextNoPrompt(StrictStep):
    op: Literal["note"]
    text: str


class _PromptNoText(StrictStep):
    op: Literal["ask"]


@pytest.mark.parametrize(
    ("model", "prompts", "error", "message"),
    [
        (_NoLiteral, False, TypeError, "needs a field op: Literal"),
        (_TextNoPrompt, False, TypeError, "op note has a field text"),
        (_PromptNoText, True, TypeError, "op ask prompts, so its model needs a field text"),
        (NewSessionsStep, False, ValueError, "op newSessions is already registered"),
    ],
)
def test_a_bad_registration_is_refused(
    model: type[StrictStep], prompts: bool, error: type[Exception], message: str
) -> None:
    registry = OpRegistry()
    registry.register(NewSessionsStep, _new_sessions)
    with pytest.raises(error, match=message):
        registry.register(model, _never, prompts=prompts)  # pyright: ignore[reportArgumentType]
    assert [op.name for op in registry] == ["newSessions"]
    with pytest.raises(KeyError):
        registry.unregister("ask")


class _Nothing:
    """A driver no op may reach: the registry refuses before calling the op."""

    acp: Any = None
    cwd = Path()

    def session(self, op: str) -> str:
        raise AssertionError(op)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"op": "waitForTurnEnd"}, "needs op waitForTurnEnd: this runner does not drive it"),
        ({"op": "prompt"}, "op prompt: .* does not fit it"),
        ({"op": "initialize", "terminalOutput": "yes"}, "op initialize: .* does not fit it"),
    ],
)
def test_a_step_the_registry_cannot_drive_is_an_agent_error(
    raw: dict[str, Any], message: str
) -> None:
    with pytest.raises(AgentError, match=message):
        OPS.drive(_Nothing(), raw)


def test_agent_process_is_a_deprecated_alias_of_scenario_agent() -> None:
    with pytest.warns(DeprecationWarning, match=r"AgentProcess is deprecated.*removal in 0\.3\.0"):
        old = dsh_snapshot.AgentProcess  # pyright: ignore[reportAttributeAccessIssue]
    assert old is ScenarioAgent


def test_copy_scenario_keeps_profile_name_and_links(tmp_path: Path) -> None:
    from dsh_snapshot.testing import copy_scenario  # noqa: PLC0415 - one helper, one test

    source = _ours(tmp_path / "src", _STEPS[:1])
    (source / "link").symlink_to("/etc/hostname")
    copy = copy_scenario(source, tmp_path / "dst")
    assert copy == tmp_path / "dst" / "sdk" / "own-op"
    assert (copy / "link").is_symlink()  # copied as a link, never followed
    assert (copy / "input.json").read_bytes() == (source / "input.json").read_bytes()
    with pytest.raises(FileNotFoundError, match="not a scenario folder"):
        copy_scenario(tmp_path, tmp_path / "again")

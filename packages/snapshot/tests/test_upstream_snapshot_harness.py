"""Upstream's June snapshot harness (``examples/acp-agent/tests/snapshot-harness.ts``): every op
it drives, with its semantics, and a clear ``needs …`` for what we do not drive.

The op semantics are checked against a small scripted ACP peer (written into tmp_path) that
records what it receives, so each case can see exactly what the runner sent and when.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dsh_snapshot import load_scenario, run_scenario
from dsh_snapshot._agent import AgentError, ScenarioAgent
from dsh_snapshot._needs import step_needs
from dsh_snapshot._scenario import Step
from dsh_snapshot._steps import OPS

# A scripted ACP peer: answers initialize and session/new (rejecting additionalDirectories with
# -32602, as upstream's bridge does), and for session/prompt streams a thought chunk, waits
# 0.5 s noting any cancel that arrives early, streams a message chunk, then answers
# "cancelled" once the cancel comes. Every line it reads goes to the file in argv[1].
_PEER = textwrap.dedent(
    """
    import json, select, sys

    log = open(sys.argv[1], "a")

    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n")
        sys.stdout.flush()

    def update(session, kind):
        content = {"type": "text", "text": kind}
        params = {"sessionId": session, "update": {"sessionUpdate": kind, "content": content}}
        send({"jsonrpc": "2.0", "method": "session/update", "params": params})

    def read():
        line = sys.stdin.readline()
        if line:
            log.write(line)
            log.flush()
        return json.loads(line) if line else None

    while (frame := read()) is not None:
        method, params = frame.get("method"), frame.get("params", {})
        answer = {"jsonrpc": "2.0", "id": frame.get("id")}
        if method == "initialize":
            send(answer | {"result": {"protocolVersion": 1}})
        elif method == "session/new" and params.get("additionalDirectories"):
            send(answer | {"error": {"code": -32602, "message": "Invalid params"}})
        elif method == "session/new":
            send(answer | {"result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            update("s1", "agent_thought_chunk")
            if select.select([sys.stdin], [], [], 0.5)[0]:
                log.write("EARLY CANCEL\\n")
            update("s1", "agent_message_chunk")
            while (frame := read()) is not None and frame.get("method") != "session/cancel":
                pass
            send(answer | {"result": {"stopReason": "cancelled"}})
    """
)


@pytest.fixture
def peer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make the runner start the scripted peer; returns the file its input is logged to."""
    script = tmp_path / "peer.py"
    script.write_text(_PEER)
    received = tmp_path / "received.jsonl"
    monkeypatch.setattr(
        "dsh_snapshot._agent.agent_command", lambda: [sys.executable, str(script), str(received)]
    )
    return received


def _drive(tmp_path: Path, steps: list[dict[str, Any]]) -> ScenarioAgent:
    agent = ScenarioAgent(tmp_path, {"PATH": "/usr/bin:/bin"}, timeout=30)
    with agent:
        for step in steps:
            agent.run_step(Step.model_validate(step))
        agent.finish()
    return agent


def _received(log: Path) -> list[Any]:
    lines = log.read_text().splitlines()
    return [json.loads(line) if line.startswith("{") else line for line in lines]


@pytest.mark.parametrize(
    ("step", "capabilities"),
    [
        ({"op": "initialize"}, {}),
        ({"op": "initialize", "terminalOutput": False}, {}),
        ({"op": "initialize", "terminalOutput": True}, {"_meta": {"terminal_output": True}}),
    ],
)
def test_initialize_sends_terminal_output_as_the_harness_does(
    tmp_path: Path, peer: Path, step: dict[str, Any], capabilities: dict[str, Any]
) -> None:
    _drive(tmp_path, [step])
    [request] = _received(peer)
    assert request["params"] == {"protocolVersion": 1, "clientCapabilities": capabilities}


def test_new_session_expect_error_passes_when_session_new_is_rejected(
    tmp_path: Path, peer: Path
) -> None:
    agent = _drive(
        tmp_path,
        [{"op": "initialize"}, {"op": "newSessionExpectError", "additionalDirectories": ["/x"]}],
    )
    request = _received(peer)[1]
    assert request["method"] == "session/new"
    assert request["params"] == {
        "cwd": str(tmp_path),
        "mcpServers": [],
        "additionalDirectories": ["/x"],
    }
    assert agent.frames[-1]["error"]["code"] == -32602
    assert agent.session_ids == []  # as upstream: a rejected session/new names no session


def test_new_session_expect_error_fails_when_session_new_succeeds(
    tmp_path: Path, peer: Path
) -> None:
    with pytest.raises(AgentError, match="session/new succeeded but an error response"):
        _drive(tmp_path, [{"op": "initialize"}, {"op": "newSessionExpectError"}])
    assert "additionalDirectories" not in _received(peer)[1]["params"]


def test_prompt_and_cancel_cancels_after_the_first_message_chunk(
    tmp_path: Path, peer: Path
) -> None:
    steps = [{"op": "initialize"}, {"op": "newSession"}, {"op": "promptAndCancel", "text": "go"}]
    agent = _drive(tmp_path, steps)
    received = _received(peer)
    assert "EARLY CANCEL" not in received  # the thought chunk alone does not trigger it
    assert received[-1] == {
        "jsonrpc": "2.0",
        "method": "session/cancel",
        "params": {"sessionId": "s1"},
    }
    assert agent.frames[-1]["result"] == {"stopReason": "cancelled"}


@pytest.mark.parametrize(
    ("steps", "needs"),
    [
        # every op and field of the June harness, and our loadSession: nothing needed
        (
            [
                {"op": "initialize", "terminalOutput": True},
                {"op": "newSessionExpectError", "additionalDirectories": ["/a"]},
                {"op": "newSession"},
                {"op": "prompt", "text": "a"},
                {"op": "promptExpectError", "text": "b"},
                {"op": "promptAndCancel", "text": "c"},
                {"op": "cancel"},
                {"op": "loadSession"},
            ],
            [],
        ),
        ([{"op": "waitForTurnEnd"}, {"op": "waitForTurnEnd"}], ["op waitForTurnEnd"]),
        (
            [{"op": "promptAndCancel", "text": "c", "waitForFile": "f"}, {"op": "promptContent"}],
            ["op promptAndCancel with waitForFile", "op promptContent"],
        ),
    ],
)
def test_step_needs(steps: list[dict[str, Any]], needs: list[str]) -> None:
    assert step_needs(steps) == needs


def test_every_harness_op_is_driven() -> None:
    # The union type InputStep of snapshot-harness.ts, op by op, with its fields.
    june = {
        "initialize": {"terminalOutput"},
        "newSession": set[str](),
        "newSessionExpectError": {"additionalDirectories"},
        "prompt": {"text"},
        "promptExpectError": {"text"},
        "promptAndCancel": {"text"},
        "cancel": set[str](),
    }
    for op, fields in june.items():
        assert OPS.fields[op] == fields


def _folder(root: Path, steps: list[dict[str, Any]], tools: tuple[str, ...] = ()) -> Path:
    folder = root / "up" / "x"
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(json.dumps({"steps": steps}))
    (folder / "stdout.golden.jsonl").write_text("")
    lines = ['{"type":"session","version":0,"id":"a","createdAt":1}']
    for n, name in enumerate(tools):
        data = {"turn": 1, "step": 1, "callId": f"c{n}", "name": name, "arguments": "{}"}
        lines.append(json.dumps({"type": "tool/call", "data": data}))
    (folder / "session.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_a_scenario_reports_the_ops_tools_and_features_it_needs(tmp_path: Path) -> None:
    steps = [{"op": "initialize"}, {"op": "waitForTurnEnd"}]
    folder = _folder(tmp_path, steps, tools=("bash", "read", "subagent_fork", "bash_output"))
    (folder / "workspace").mkdir()
    (folder / "workspace" / "hooks.json").write_text("{}")
    scenario = load_scenario(folder)
    assert scenario.needs() == [
        "op waitForTurnEnd",
        "tool bash_output",
        "tool read",
        "hooks (workspace/hooks.json)",
    ]
    assert scenario.needs(recordings=False) == ["op waitForTurnEnd", "hooks (workspace/hooks.json)"]


def test_run_scenario_says_what_is_needed_instead_of_running(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [{"op": "initialize"}, {"op": "waitForTurnEnd"}], tools=("read",))
    result = run_scenario(load_scenario(folder))
    assert not result.ok
    assert result.needs == ["op waitForTurnEnd", "tool read"]
    assert result.summary == "needs op waitForTurnEnd; tool read"
    assert (result.sessions, result.frames) == (0, [])  # no agent was started


def test_an_unreadable_recording_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    folder = _folder(tmp_path, [{"op": "initialize"}])
    (folder / "session.jsonl").write_text("not json\n")
    result = run_scenario(load_scenario(folder))
    assert not result.ok
    assert "session.jsonl:1" in result.summary

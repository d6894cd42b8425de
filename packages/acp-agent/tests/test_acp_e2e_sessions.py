"""End to end: session/load, persistence backends, settings and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dsh_acp_agent.testing import AgentRun, text_reply, tool_reply
from dsh_core.plugins import DEFAULT_MODEL_PROVIDER, store_backend
from dsh_scripted_server import ScriptedModelServer, resolve_profile

pytestmark = pytest.mark.e2e


def test_acp_session_load_resumes(agent_run: AgentRun, model_server: ScriptedModelServer) -> None:
    fork = {"description": "Ask", "prompt": "Codeword?"}
    model_server.add_session(
        [
            text_reply("OK"),
            tool_reply(("call_f", "subagent_fork", fork)),
            text_reply("DONE"),
            text_reply("THIRD"),
        ]
    )
    model_server.add_session([text_reply("MARMALADE"), text_reply("AGAIN")])
    with agent_run.start() as agent:
        agent.initialize()
        parent_id = agent.new_session(agent_run.workspace)
        agent.prompt(parent_id, "The codeword is MARMALADE.")
        agent.prompt(parent_id, "Fork.")
        agent_run.finish(agent)
    [child_before] = [log for log in agent_run.logs() if log.header.parent_session == parent_id]
    child_id = child_before.header.id
    parent_before = agent_run.log(parent_id)
    assert child_before.header.seed_length is not None

    with agent_run.start() as agent:
        agent.initialize()
        load: dict[str, object] = {"cwd": str(agent_run.workspace), "mcpServers": []}
        assert agent.request("session/load", {"sessionId": parent_id, **load}) == {}
        replayed = agent.updates(parent_id)
        assert agent.prompt(parent_id, "Third.") == {"stopReason": "end_turn"}
        assert agent.request("session/load", {"sessionId": child_id, **load}) == {}
        assert agent.prompt(child_id, "Again.") == {"stopReason": "end_turn"}
        agent_run.finish(agent)

    # The stored conversation is shown as it was streamed, user messages included.
    assert replayed[0] == {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": "The codeword is MARMALADE."},
    }
    kinds = [update["sessionUpdate"] for update in replayed]
    assert kinds == [
        "user_message_chunk",
        "agent_message_chunk",
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    parent_after = agent_run.log(parent_id)
    child_after = agent_run.log(child_id)
    assert parent_after.header.to_json() == parent_before.header.to_json()
    assert child_after.header.to_json() == child_before.header.to_json()
    n = len(parent_before.events)
    assert [e.to_json() for e in parent_after.events[:n]] == [
        e.to_json() for e in parent_before.events
    ]
    assert parent_after.events[n].data["turn"] == 3
    child_turns = [e.data["turn"] for e in child_after.events if e.type == "turn/start"]
    assert child_turns == [1, 2, 3]
    model_server.assert_consumed()


def test_acp_sqlite_persistence(agent_run: AgentRun, model_server: ScriptedModelServer) -> None:
    model_server.add_session([text_reply("STORED")])
    with agent_run.start(DSH_STORE="sqlite") as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(session_id, "hi") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    sqlite, jsonl = store_backend("sqlite"), store_backend("jsonl")
    assert [h.id for h in sqlite.list_sessions(agent_run.sessions_root)] == [session_id]
    assert jsonl.list_sessions(agent_run.sessions_root) == []
    store = sqlite.open(agent_run.sessions_root)
    try:
        log = store.load(session_id)
    finally:
        store.close()
    assert log.header.cwd == str(agent_run.workspace)
    assert log.events[-1].data == {"turn": 1, "reason": {"kind": "completed"}}


def test_acp_replay_client_exit_codes(
    agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    model_server.add_session([text_reply("RECORDED", reasoning="Think")])
    with agent_run.start() as agent:
        agent.initialize()
        recorded_id = agent.new_session(agent_run.workspace)
        agent.prompt(recorded_id, "hi")
        agent_run.finish(agent)
    recording = agent_run.workspace / "recording.jsonl"
    recording.write_text(store_backend("jsonl").export_log(agent_run.sessions_root, recorded_id))
    report = agent_run.workspace / "report.json"
    replay = {
        "DSH_MODEL_CLIENT": "replay",
        "DSH_SNAPSHOT_FILE": str(recording),
        "DSH_REPLAY_REPORT": str(report),
    }
    with agent_run.start(**replay) as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(session_id, "hi") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    assert [u["content"]["text"] for u in agent.updates()] == ["Think", "RECORDED"]
    assert json.loads(report.read_text(encoding="utf-8"))
    report.unlink()
    # Nothing prompted: the recorded call was never made, so the run must fail.
    with agent_run.start(**replay) as agent:
        agent.initialize()
        assert agent.finish() == 3
    [message] = [line for line in agent.stderr.splitlines() if line.startswith("dsh-acp-agent:")]
    assert str(recording) in message  # the unconsumed script is named
    assert report.is_file()
    assert agent.stray_lines == []


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DSH_STORE", "xml"),
        ("DSH_MAX_STEPS", "0"),
        ("DSH_MODEL_CLIENT", "gpt"),
        (resolve_profile(DEFAULT_MODEL_PROVIDER).env_name("max_retries"), "many"),
    ],
)
def test_acp_invalid_setting_exits_2(agent_run: AgentRun, variable: str, value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh_acp_agent"],
        input=b"",
        capture_output=True,
        env={**agent_run.env, variable: value},
        cwd=agent_run.workspace,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1
    assert variable in lines[0]
    assert value in lines[0]


def test_acp_stdio_may_be_regular_files(agent_run: AgentRun) -> None:
    requests = agent_run.workspace / "requests.jsonl"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1},
    }
    unknown: dict[str, object] = {"jsonrpc": "2.0", "id": 2, "method": "session/fly", "params": {}}
    requests.write_text(f"{json.dumps(initialize)}\nnot json\n{json.dumps(unknown)}\n")
    output = agent_run.workspace / "frames.jsonl"
    with requests.open("rb") as stdin, output.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "dsh_acp_agent"],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=agent_run.env,
            cwd=agent_run.workspace,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    frames = [json.loads(line) for line in output.read_text().splitlines()]
    by_id = {json.dumps(frame["id"]): frame for frame in frames}
    assert len(frames) == 3
    assert by_id["null"]["error"] == {"code": -32700, "message": "Parse error"}
    assert by_id["1"]["result"]["agentInfo"]["name"] == "dsh-acp-agent"
    assert by_id["2"]["error"]["code"] == -32601

"""End to end: single turns through the real ``dsh-acp-agent`` process and a scripted server."""

from __future__ import annotations

import json
import secrets
import signal
import string
from pathlib import Path
from typing import Any

import pytest
from acp.schema import SessionNotification

from dsh_acp_agent.testing import AgentRun, ResponseError, text_reply, tool_reply
from dsh_core.plugins import model_env_prefixes
from dsh_scripted_server import Fault, Pause, ScriptedModelServer

pytestmark = pytest.mark.e2e


def _event_types(run: AgentRun, session_id: str) -> list[str]:
    return [event.type for event in run.log(session_id).events]


def test_acp_text_turn(agent_run: AgentRun, model_server: ScriptedModelServer) -> None:
    model_server.add_session([text_reply("PONG", reasoning="Say PONG")])
    with agent_run.start() as agent:
        init = agent.initialize()
        assert init["agentInfo"]["name"] == "dsh-acp-agent"
        assert init["agentCapabilities"]["loadSession"] is True
        session_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(session_id, "Reply PONG") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    assert agent.frames[1]["result"] == {"sessionId": session_id}
    assert agent.updates(session_id) == [
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "Say"}},
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": " PONG"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "PONG"}},
    ]
    for frame in agent.frames:
        if frame.get("method") == "session/update":
            SessionNotification.model_validate(frame["params"])
    log = agent_run.log(session_id)
    assert log.header.cwd == str(agent_run.workspace)
    assert log.events[-1].data == {"turn": 1, "reason": {"kind": "completed"}}
    [request] = model_server.requests
    assert request.session_id == session_id


def test_acp_bash_tool_turn(agent_run: AgentRun, model_server: ScriptedModelServer) -> None:
    command = "echo to-stdout; echo to-stderr >&2; pwd"
    model_server.add_session(
        [
            tool_reply(("call_1", "bash", {"command": command, "description": "Print things"})),
            text_reply("DONE"),
        ]
    )
    with agent_run.start() as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(session_id, "run it") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    call, result, done = agent.updates(session_id)
    assert call == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_1",
        "title": command,
        "kind": "execute",
        "status": "in_progress",
        "rawInput": command,
        "content": [{"type": "content", "content": {"type": "text", "text": "Print things"}}],
    }
    output = f"to-stdout\n{agent_run.workspace}\n[stderr]\nto-stderr\n"
    assert result == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_1",
        "status": "completed",
        "content": [
            {"type": "content", "content": {"type": "text", "text": f"```console\n{output}```"}}
        ],
    }
    assert done["content"]["text"] == "DONE"
    # The command's own stdout went into the tool result, never onto the agent's stdout.
    assert agent.stray_lines == []
    assert "tool/result" in _event_types(agent_run, session_id)


def test_acp_cancel_mid_stream(agent_run: AgentRun, model_server: ScriptedModelServer) -> None:
    pause = Pause()
    partial: list[Any] = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "partial"},
        pause,
    ]
    model_server.add_session([partial, text_reply("after")])
    with agent_run.start() as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        prompt_id = agent.send(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "long task"}]},
        )
        assert pause.wait_reached(60)
        with pytest.raises(ResponseError) as busy:
            agent.prompt(session_id, "a second prompt while the first runs")
        assert "already running a prompt" in busy.value.error["message"]
        agent.notify("session/cancel", {"sessionId": session_id})
        assert agent.response(prompt_id)["result"] == {"stopReason": "cancelled"}
        # The session goes on: the next turn is numbered after the aborted one.
        assert agent.prompt(session_id, "again") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    updates = agent.updates(session_id)
    assert updates[0] == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "partial"},
    }
    events = agent_run.log(session_id).events
    ends = [event.data for event in events if event.type == "turn/end"]
    assert ends[0] == {"turn": 1, "reason": {"kind": "aborted", "reason": "session/cancel"}}
    assert ends[-1] == {"turn": 2, "reason": {"kind": "completed"}}


def test_acp_stdin_eof_finishes_the_turn_in_flight(
    agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    model_server.add_session([text_reply("LATE ANSWER")])
    with agent_run.start() as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        prompt_id = agent.send(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]},
        )
        agent_run.finish(agent)  # closes stdin at once; the answer still has to come
    assert agent.response(prompt_id)["result"] == {"stopReason": "end_turn"}
    assert [u["content"]["text"] for u in agent.updates(session_id)] == ["LATE", " ANSWER"]
    assert agent_run.log(session_id).events[-1].type == "turn/end"


def test_acp_retries_429_and_500(agent_run: AgentRun, model_server: ScriptedModelServer) -> None:
    model_server.add_session(
        [
            Fault.status(429, retry_after=0),
            text_reply("ONE"),
            Fault.status(500),
            text_reply("TWO"),
        ]
    )
    with agent_run.start() as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(session_id, "first") == {"stopReason": "end_turn"}
        assert agent.prompt(session_id, "second") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    assert [u["content"]["text"] for u in agent.updates(session_id)] == ["ONE", "TWO"]
    assert len(model_server.requests) == 4
    model_server.assert_consumed()
    ends = [
        e.data["reason"]["kind"] for e in agent_run.log(session_id).events if e.type == "turn/end"
    ]
    assert ends == ["completed", "completed"]


def test_acp_drop_mid_stream_is_an_error_turn(
    agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    truncated = text_reply("TRUNCATED")
    truncated[-1] = {"type": "finish", "reason": {"kind": "max-tokens"}}
    model_server.add_session([Fault.drop_after(2), text_reply("RECOVERED"), truncated])
    with agent_run.start() as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        with pytest.raises(ResponseError) as failed:
            agent.prompt(session_id, "stream and drop")
        assert failed.value.error["code"] == -32603
        assert failed.value.error["message"].startswith("Internal error: turn failed: ")
        assert set(failed.value.error) == {"code", "message"}
        # The session is still usable after the failed turn.
        assert agent.prompt(session_id, "again") == {"stopReason": "end_turn"}
        # A reply cut by the output token limit: head's bridge (the default profile) settles
        # it as ordinary quiescence, end_turn; the turn/end below still says max-tokens.
        assert agent.prompt(session_id, "long answer") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    texts = [u["content"]["text"] for u in agent.updates(session_id)]
    assert texts == ["part0 ", "part1 ", "RECOVERED", "TRUNCATED"]
    log = agent_run.log(session_id)  # loadable: a strict read of the whole file
    ends = [e.data for e in log.events if e.type == "turn/end"]
    assert ends[0]["reason"]["kind"] == "error"
    assert failed.value.error["message"] == (
        f"Internal error: turn failed: {ends[0]['reason']['message']}"
    )
    assert [end["reason"]["kind"] for end in ends[1:]] == ["completed", "max-tokens"]


def test_acp_unknown_session_is_an_error(agent_run: AgentRun) -> None:
    with agent_run.start() as agent:
        agent.initialize()
        with pytest.raises(ResponseError) as failed:
            agent.prompt("no-such-session", "hi")
        assert "no-such-session" in failed.value.error["message"]
        with pytest.raises(ResponseError) as failed_load:
            agent.request(
                "session/load",
                {"sessionId": "no-such-session", "cwd": str(agent_run.workspace), "mcpServers": []},
            )
        assert "no-such-session" in failed_load.value.error["message"]
        agent_run.finish(agent)


def test_acp_sigterm_aborts_the_turn_and_exits(
    agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    pause = Pause()
    hang: list[Any] = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "working"},
        pause,
    ]
    model_server.add_session([hang])
    with agent_run.start() as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        prompt_id = agent.send(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "long"}]},
        )
        assert pause.wait_reached(60)
        agent.process.send_signal(signal.SIGTERM)
        assert agent.response(prompt_id)["result"] == {"stopReason": "cancelled"}
        assert agent.process.wait(timeout=60) == 0
        agent_run.finish(agent)
    ends = [e.data for e in agent_run.log(session_id).events if e.type == "turn/end"]
    assert ends == [{"turn": 1, "reason": {"kind": "aborted", "reason": "session/cancel"}}]


def test_acp_bash_sees_no_secret_and_stays_confined(
    agent_run: AgentRun, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    alphabet = string.ascii_letters + string.digits
    key = "sk-" + "".join(secrets.choice(alphabet) for _ in range(40))
    outside = tmp_path / "outside"
    outside.mkdir()
    key_name = model_server.profile.env_name("api_key")
    command = f"env; printenv {key_name}; echo $HOME; touch {outside}/escaped; echo end"
    model_server.add_session(
        [
            tool_reply(("call_1", "bash", {"command": command, "description": "Look around"})),
            text_reply("DONE"),
        ]
    )
    secrets_and_sandbox = {key_name: key, "GITHUB_TOKEN": key}
    with agent_run.start(
        **secrets_and_sandbox, DSH_SANDBOX="strict", DSH_SANDBOX_NETWORK="deny"
    ) as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(session_id, "run it") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    result = next(e for e in agent_run.log(session_id).events if e.type == "tool/result")
    text = result.data["content"][0]["text"]
    assert "PATH=" in text
    assert [p for p in model_env_prefixes() if p in text] == []  # no provider's variable
    assert "TOKEN" not in text
    [home] = [line[5:] for line in text.splitlines() if line.startswith("HOME=")]
    assert Path(home).parent.name.startswith("dsh-tool-")
    assert not Path(home).exists()  # the private home went with the agent
    # The host's /tmp (where `outside` lies) is hidden inside the sandbox.
    assert "escaped': No such file or directory" in text
    assert not (outside / "escaped").exists()
    assert "\nend\n[stderr]\n" in text  # stdout, then the stderr section
    written = [*(p.read_bytes() for p in agent_run.sessions_root.rglob("*") if p.is_file())]
    for blob in [*written, json.dumps(agent.frames).encode(), agent.stderr.encode()]:
        assert key.encode() not in blob
    # The agent itself had the key and used it: only its tools were kept from it.
    assert [r.authorized for r in model_server.requests] == [True, True]


@pytest.mark.parametrize(
    ("profile", "stop_reason", "header_depth"),
    [("june", "max_tokens", None), ("current", "end_turn", 0)],
)
def test_acp_profile_decides_max_tokens_stop_and_top_level_depth(
    agent_run: AgentRun,
    model_server: ScriptedModelServer,
    profile: str,
    stop_reason: str,
    header_depth: int | None,
) -> None:
    """June's bridge reports a max-tokens turn as ``max_tokens`` and its primaries carry no
    ``delegationDepth``; head's reports ``end_turn`` and writes ``delegationDepth: 0``."""
    truncated = text_reply("CUT")
    truncated[-1] = {"type": "finish", "reason": {"kind": "max-tokens"}}
    model_server.add_session([truncated])
    with agent_run.start(DSH_LOOP_PROFILE=profile) as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(session_id, "long answer") == {"stopReason": stop_reason}
        agent_run.finish(agent)
    log = agent_run.log(session_id)
    assert log.header.delegation_depth == header_depth
    header_line = next(agent_run.sessions_root.glob("**/*.jsonl")).read_text().splitlines()[0]
    keys = list(json.loads(header_line))
    expected = ["type", "version", "id", "createdAt", "cwd"]
    assert keys == (expected if header_depth is None else [*expected, "delegationDepth"])
    assert [e.data["reason"]["kind"] for e in log.events if e.type == "turn/end"] == ["max-tokens"]

"""Issue #8 end to end: a provider echoing the key leaves it in no frame, log or stderr line."""

from __future__ import annotations

import json
import secrets
import string

import pytest

from dsh_acp_agent.testing import AgentRun, ResponseError, text_reply
from dsh_core.plugins import store_backend
from dsh_scripted_server import Fault, ScriptedModelServer

pytestmark = pytest.mark.e2e


def test_a_key_echoed_by_the_provider_reaches_no_artefact(
    agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    # Built at run time: no key-shaped string lives in a tracked file.
    key = "sk-" + "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(32))
    in_stream = f'data: {{"error": {{"message": "quota for {key} is spent"}}}}\n\n'
    model_server.add_session(
        [
            Fault.status(401, body="x" * 4090 + f"Your api key {key} is invalid"),
            Fault.raw(['data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n', in_stream]),
            text_reply("STILL USABLE"),
        ]
    )
    messages: list[str] = []
    profile = model_server.profile
    no_retries = {profile.env_name("api_key"): key, profile.env_name("max_retries"): "0"}
    with agent_run.start(**no_retries) as agent:
        agent.initialize()
        session_id = agent.new_session(agent_run.workspace)
        for prompt in ("first", "second"):
            with pytest.raises(ResponseError) as failed:
                agent.prompt(session_id, prompt)
            messages.append(failed.value.error["message"])
        assert agent.prompt(session_id, "third") == {"stopReason": "end_turn"}
        agent_run.finish(agent)
    assert "[redacted]" in messages[1]
    written = [
        json.dumps(agent.frames),
        agent.stderr,
        store_backend("jsonl").export_log(agent_run.sessions_root, session_id),  # every byte
    ]
    fragments = [key[i : i + 8] for i in range(len(key) - 7)]
    assert [f for f in fragments for text in written if f in text] == []
    # The key did reach the server, in the Authorization header only.
    assert all(r.authorized for r in model_server.requests)

"""Fidelity: the June recordings' model streams in, the June stdout fixtures out, frame by frame.

Each recorded session's chunk groups (one per ``(turn, step)``; a fork child's seeded prefix
left out) are served by the scripted model server; the scenario's steps are driven through the
real agent process; stdout must equal ``stdout.golden.jsonl`` after normalising session ids and
JSON-RPC ids — key order included. Only the ``initialize`` result (the agent's name and
version) may differ.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from dsh_acp_agent.testing import AgentRun
from dsh_core import ChunksEntry, derive_replay_script, read_log_text
from dsh_scripted_server import ScriptedModelServer

pytestmark = [pytest.mark.e2e, pytest.mark.corpus]

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _scripts(folder: Path) -> list[list[ChunksEntry]]:
    """One script per recorded session: the primary first, then children in file order."""
    files = [folder / "session.jsonl"]
    files += sorted(folder.glob("session.*.jsonl"), key=lambda p: int(p.name.split(".")[1]))
    scripts: list[list[ChunksEntry]] = []
    for path in files:
        log = read_log_text(path.read_text(encoding="utf-8"), str(path))
        own = log.events[log.header.seed_length or 0 :]
        scripts.append(derive_replay_script(own))
    return scripts


def _normalised(frames: list[dict[str, Any]], cwd: str) -> list[str]:
    ids: dict[Any, int] = {}
    lines: list[str] = []
    for raw in frames:
        frame = {**raw, "id": ids.setdefault(raw["id"], len(ids) + 1)} if "id" in raw else raw
        text = json.dumps(frame, separators=(",", ":"), ensure_ascii=False)
        lines.append(_UUID.sub("{{sessionId}}", text.replace(cwd, "{{cwd}}")))
    return lines


@pytest.mark.parametrize("scenario", ["text-turn", "tool-call-turn", "subagent-fork"])
def test_acp_stdout_matches_june_golden(
    june_corpus: Path, scenario: str, agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    folder = june_corpus / scenario
    for script in _scripts(folder):
        model_server.add_session(script)
    steps: list[dict[str, str]] = json.loads((folder / "input.json").read_text())["steps"]
    with agent_run.start() as agent:
        session_id = ""
        for step in steps:
            if step["op"] == "initialize":
                agent.initialize()
            elif step["op"] == "newSession":
                session_id = agent.new_session(agent_run.workspace)
            else:
                assert step["op"] == "prompt", f"unsupported step {step}"
                agent.prompt(session_id, step["text"])
        agent_run.finish(agent)
    golden = (folder / "stdout.golden.jsonl").read_text(encoding="utf-8").splitlines()
    ours = _normalised(agent.frames, str(agent_run.workspace))
    assert len(ours) == len(golden)
    # Frame 0 is the initialize result: our agent's own name and version.
    upstream_info = '{"name":"deepseek-harness-acp","version":"0.0.1"}'
    our_info = json.dumps({"name": "dsh-acp-agent", "version": version("dsh-acp-agent")})
    assert ours[0] == golden[0].replace(upstream_info, our_info.replace(" ", ""))
    assert ours[1:] == golden[1:]
    model_server.assert_consumed()

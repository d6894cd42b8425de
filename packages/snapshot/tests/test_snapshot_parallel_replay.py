"""Concurrent subagents replay deterministically (``snapshots/sdk/subagent-parallel``).

The parent delegates two different prompts in one message; under the ``current`` loop the
children run concurrently. With a random 0-50 ms delay before every child model call, the
children reach the replay client in either order, yet each must bind to the recorded child
that answered its parent call and the logs must equal the committed fixtures every time.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from dsh_acp_agent import AgentSettings, build_agent
from dsh_core import CreateOptions, SessionMeta, log_normalizer, normalize_log, read_log
from dsh_core.plugins import model_env_prefixes
from dsh_llm_replay import ReplayModelClient
from dsh_snapshot import SnapshotSettings, harvest, load_scenario, run_scenario

SCENARIO = Path(__file__).resolve().parents[3] / "snapshots" / "sdk" / "subagent-parallel"
JITTER_MS = 50
IN_PROCESS_RUNS = 50
SUBPROCESS_RUNS = 3


def _normalized(texts: list[tuple[str, str]], cwds: set[str]) -> list[list[Any]]:
    logs = [read_log(text.splitlines(), source) for source, text in texts]
    norm = log_normalizer(logs, tree=True, cwds=cwds)
    return [normalize_log(log, norm) for log in logs]


def _expected() -> list[list[Any]]:
    files = load_scenario(SCENARIO).session_files
    return _normalized([(str(p), p.read_text(encoding="utf-8")) for p in files], set())


def _prompt() -> str:
    steps: list[dict[str, Any]] = json.loads((SCENARIO / "input.json").read_text("utf-8"))["steps"]
    [text] = [step["text"] for step in steps if step["op"] == "prompt"]
    return text


async def _replay_in_process(tmp: Path, prompt: str) -> tuple[list[str], ReplayModelClient]:
    cwd, root = tmp / "cwd", tmp / "sessions"
    cwd.mkdir()
    settings = AgentSettings(
        sessions_root=root, store="jsonl", model_client="replay", loop_profile="current"
    )
    wiring = build_agent(settings)
    replay = wiring.replay
    assert isinstance(replay, ReplayModelClient)  # found by its dsh.models name, "replay"
    # as the ACP server opens a top-level session under this profile (head's delegationDepth 0)
    depth = 0 if wiring.agent.config.behaviour.top_level_depth else None
    meta = SessionMeta(cwd=str(cwd), delegation_depth=depth)
    session = wiring.agent.store.create(CreateOptions(meta=meta))
    try:
        outcome = await wiring.agent.run_turn(session, prompt)
    finally:
        session.close()
    assert (outcome.kind, outcome.final_text) == ("completed", "PARENT_DONE")
    return harvest(root, "jsonl"), replay


@pytest.fixture
def replay_env(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = load_scenario(SCENARIO)
    for name in [n for n in os.environ if n.startswith(("DSH_", *model_env_prefixes()))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DSH_SNAPSHOT_FILE", str(scenario.primary_file))
    monkeypatch.setenv(
        "DSH_SNAPSHOT_CHILD_FILES", os.pathsep.join(str(p) for p in scenario.child_files)
    )
    monkeypatch.setenv("DSH_REPLAY_CHILD_JITTER_MS", str(JITTER_MS))


@pytest.mark.slow  # >= 2.5 s: nox -s tests_slow (the test command's 4-minute budget)
@pytest.mark.usefixtures("replay_env")
def test_fifty_jittered_in_process_replays_give_the_committed_logs(tmp_path: Path) -> None:
    expected = _expected()
    prompt = _prompt()
    second_child_first = 0
    for run in range(IN_PROCESS_RUNS):
        tmp = tmp_path / f"run{run}"
        tmp.mkdir()
        texts, replay = asyncio.run(_replay_in_process(tmp, prompt))
        replay.assert_consumed()
        assert (
            _normalized([(f"run{run}[{i}]", t) for i, t in enumerate(texts)], {str(tmp / "cwd")})
            == expected
        ), f"run {run}"
        report = replay.report()
        # Each recorded child is bound to the live child created for the same call (the live
        # children are harvested in creation order, as the recorded ones are numbered).
        live_children = [json.loads(t.partition("\n")[0])["id"] for t in texts[1:]]
        bound = [s.bound_session for s in report.scripts[1:]]
        assert bound == live_children, f"run {run}"
        # Which child reached the model first: the sessions list is in binding order.
        order = [s.session_id for s in report.sessions]
        second_child_first += order.index(live_children[1]) < order.index(live_children[0])
    # The jitter did shuffle the children (all 50 in one order has odds 2**-49).
    assert 0 < second_child_first < IN_PROCESS_RUNS


def test_jittered_subprocess_replays_pass() -> None:
    scenario = load_scenario(SCENARIO)
    assert scenario.loop == "current"
    for _ in range(SUBPROCESS_RUNS):
        result = run_scenario(scenario, SnapshotSettings(child_jitter_ms=JITTER_MS))
        assert result.ok, result.failures
        assert result.sessions == 3

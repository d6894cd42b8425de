"""The replay hand-off on the agent's side: it reads ``ReplaySettings``, its replay client
writes the report once, and the exit code is the one constant the runner imports."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import dsh_acp_agent
from dsh_acp_agent import AgentSettings, build_agent
from dsh_acp_agent._main import finish_replay
from dsh_llm_replay import ReplayModelClient, ReplayReport, ReplaySettings

HEADER = '{"type":"session","version":0,"id":"recorded","createdAt":0}\n'


def _settings(tmp_path: Path) -> ReplaySettings:
    primary = tmp_path / "session.jsonl"
    primary.write_text(HEADER, encoding="utf-8")
    return ReplaySettings(  # pyright: ignore[reportCallIssue]
        snapshot_file=primary,
        snapshot_override=None,
        child_files=(),
        seed_slice=True,
        report=tmp_path / "report.json",
        child_jitter_ms=0,
    )


def test_the_agent_reads_the_replay_settings_the_runner_hands_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed = _settings(tmp_path)
    for name, value in {"DSH_MODEL_CLIENT": "replay", **handed.to_env()}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DSH_SESSIONS_ROOT", str(tmp_path / "sessions"))
    wiring = build_agent(AgentSettings())
    assert isinstance(wiring.replay, ReplayModelClient)
    assert wiring.replay.report_path == handed.report
    assert [s.header.id for s in wiring.replay.scripts] == ["recorded"]


def test_the_report_is_written_once_by_the_client_not_by_the_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(tmp_path)
    assert settings.report is not None
    monkeypatch.setenv("DSH_REPLAY_REPORT", str(settings.report))
    client = ReplayModelClient.from_settings(settings)
    asyncio.run(client.aclose())  # the agent closes its model client first…
    assert ReplayReport.read(settings.report).ok
    settings.report.unlink()
    # …then turns the verdict into the exit code, without writing the report again.
    assert finish_replay(client) == dsh_acp_agent.EXIT_OK
    asyncio.run(client.aclose())
    assert not settings.report.exists()


def test_an_unconsumed_replay_exits_with_the_one_constant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "recorded.jsonl"
    events = [
        {"type": "turn/start", "data": {"turn": 0, "trigger": {"kind": "message"}}},
        {"type": "step/start", "data": {"turn": 0, "step": 0}},
        {
            "type": "assistant/chunk",
            "data": {"turn": 0, "step": 0, "chunk": {"type": "finish", "reason": {"kind": "stop"}}},
        },
    ]
    log.write_text(HEADER + "".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    settings = _settings(tmp_path).model_copy(update={"snapshot_file": log})
    client = ReplayModelClient.from_settings(settings)
    assert finish_replay(client) == dsh_acp_agent.EXIT_REPLAY_NOT_CONSUMED == 3
    assert "was never bound" in capsys.readouterr().err
    assert finish_replay(None) == dsh_acp_agent.EXIT_OK

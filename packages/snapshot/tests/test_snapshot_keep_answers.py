"""Keyless accept of a request-side change for our own agent, through the CLI.

A replay of ``subagent-parallel`` (recorded with ``request/header``) fails on request drift
when our agent now sends another tool description than the recording holds; ``dsh-snapshot
accept`` then takes the new request with the recorded answers (no model is asked, and it says
so), and the next replay is green. When the answers do not fit the new requests (a call more
than recorded, a tool the new request no longer offers), accept refuses naming the call and
leaves every committed file as it was.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_core import parse_jsonl
from dsh_snapshot import load_scenario
from dsh_snapshot._agent import AgentError
from dsh_snapshot._keep_answers import unfit_answer
from dsh_snapshot._pending import keep_pending, load_pending
from dsh_snapshot._request_drift import drift_after_stop
from dsh_snapshot.cli import main
from dsh_snapshot.testing import tree_state

_SCENARIO = "subagent-parallel"
_OLD = "A command (old wording)."
_LIVE = "The bash command to execute."


def _rows(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, rows: list[Any]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _recorded_with_old_wording(folder: Path) -> None:
    """Make the recording one made when bash's command parameter was described otherwise:
    what our agent sends now is a request-side change."""
    path = folder / "session.jsonl"
    rows = _rows(path)
    for row in rows:
        if row.get("type") == "request/header":
            for tool in row["data"]["header"]["tools"]:
                if tool["name"] == "bash":
                    tool["parameters"]["properties"]["command"]["description"] = _OLD
    _write(path, rows)


def _answers(folder: Path) -> list[list[Any]]:
    """The recorded answers of every session fixture (their ``assistant/chunk`` data)."""
    return [
        [r["data"] for r in _rows(p) if r.get("type") == "assistant/chunk"]
        for p in sorted(folder.glob("session*.jsonl"))
    ]


def _out(capsys: pytest.CaptureFixture[str]) -> str:
    return " ".join(capsys.readouterr().out.split())  # rich wraps long lines


def _replay(folder: Path) -> int:
    return main(["replay", "--jobs", "1", "--store", "jsonl", str(folder)])


@pytest.fixture
def drifted(scenario_copy: Callable[[str], Path]) -> Path:
    """A copy of the scenario whose recording holds the old tool wording."""
    folder = scenario_copy(_SCENARIO)
    _recorded_with_old_wording(folder)
    return folder


@pytest.mark.slow
def test_accept_takes_our_agents_new_request_and_keeps_the_recorded_answers(
    drifted: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = drifted
    answers = _answers(folder)
    assert _replay(folder) == 1
    assert "request drift:" in _out(capsys)
    [pending] = load_pending(load_scenario(folder))
    assert pending.acceptable
    assert len(pending.drift) == 1
    # review says what accepting would do before it is asked (skipped here).
    monkeypatch.setattr("sys.stdin", io.StringIO("s\n"))
    monkeypatch.setenv("COLUMNS", "400")  # the panel's lines unwrapped
    assert main(["review", str(folder)]) == 0
    out = _out(capsys)
    assert "accepting takes the new requests with the recorded answers: the model is NOT" in out
    assert "1 skipped" in out

    assert main(["accept", str(folder)]) == 0
    out = _out(capsys)
    assert f"sdk/{_SCENARIO}: accepted (session.jsonl): the new requests are recorded with " in out
    assert "the model was NOT asked again (1 changed request(s); first: request drift" in out
    assert "tools[bash].parameters.properties.command.description" in out
    log = (folder / "session.jsonl").read_text(encoding="utf-8")
    assert _OLD not in log
    assert _LIVE in log  # the new request…
    assert _answers(folder) == answers  # …with the recorded answers, not new ones
    assert not (folder / ".pending").exists()
    assert _replay(folder) == 0


@pytest.mark.slow
def test_accept_refuses_answers_that_do_not_fit_naming_the_call_and_writes_nothing(
    drifted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = drifted
    steps = json.loads((folder / "input.json").read_text(encoding="utf-8"))
    steps["steps"].append({"op": "prompt", "text": "And once more."})  # a call more
    (folder / "input.json").write_text(json.dumps(steps), encoding="utf-8")
    assert _replay(folder) == 1
    capsys.readouterr()
    before = tree_state(folder)
    assert main(["accept", str(folder)]) == 1
    out = _out(capsys)
    assert "not accepted: the recorded answers do not fit the new requests:" in out
    assert "made call 3 but its script has 2 entries" in out
    assert "they need the model: record it again: dsh-snapshot record --scripted" in out
    assert tree_state(folder) == before


def test_accept_refuses_an_answer_calling_a_tool_the_new_request_no_longer_offers(
    scenario_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """No agent runs here: the pending outputs are those of a drifted replay whose new
    request no longer offers ``subagent``, which the recorded answer calls."""
    folder = scenario_copy(_SCENARIO)
    scenario = load_scenario(folder)
    logs = [parse_jsonl(p.read_text(encoding="utf-8"), str(p)) for p in scenario.session_files]
    for row in logs[0]:
        if row.get("type") == "request/header":
            tools = row["data"]["header"]["tools"]
            row["data"]["header"]["tools"] = [t for t in tools if t["name"] != "subagent"]
    frames = parse_jsonl(scenario.stdout_file.read_text(encoding="utf-8"), "stdout")
    drift = ["request drift: tools: the subagent tool is gone"]
    assert keep_pending(scenario, "jsonl", logs, frames, drift, True, None, drift) is not None
    before = tree_state(folder)
    assert main(["accept", str(folder)]) == 1
    out = _out(capsys)
    assert (
        "not accepted: the recorded answers do not fit the new requests: session.jsonl call 1: "
        "the recorded answer calls the tool 'subagent', which the new request no longer offers"
    ) in out
    assert tree_state(folder) == before
    # The same outputs with the tool still offered fit.
    [pending] = load_pending(scenario)
    committed = {p.name: p.read_text(encoding="utf-8") for p in scenario.session_files}
    assert unfit_answer(committed) is None
    assert unfit_answer(pending.files) is not None


def test_a_stopped_agent_that_left_no_report_has_no_drift_to_name(tmp_path: Path) -> None:
    """The agent did not exit cleanly after its failed step: no report, so no drift is
    claimed (accept then refuses the run as broken, not as drifted)."""
    asked: list[str] = []

    def finish() -> int:
        asked.append("finish")
        raise AgentError("the agent did not exit in time")

    assert drift_after_stop(finish, tmp_path / "replay-report.json") == []
    assert asked == ["finish"]
    (tmp_path / "replay-report.json").write_text("{not json", encoding="utf-8")
    assert drift_after_stop(lambda: 0, tmp_path / "replay-report.json") == []

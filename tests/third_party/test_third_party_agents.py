"""Real ACP agents we did not write, gated keylessly: Qwen Code (npm) and Mistral Vibe (PyPI).

`nox -s third_party_agents` installs both pinned (tests/third_party/package-lock.json,
tests/third_party/mistral-vibe.txt), puts their launchers on PATH and runs this file. The
scenarios under scenarios/ were recorded with `dsh-snapshot record --scripted` against the
scripted model server through dsh-llm-proxy; here they replay with no model at all:

- green on both stores, with the clock a day ahead (the gate itself under libfaketime) and
  from another working directory: Qwen's prompt carries today's date and the run's paths
  (its `clock:` fixes the date, the gate's placeholders the paths), Vibe's too (a `scrub:`
  turns its date into `{{date}}`);
- red, with the cause as the headline, when the user's prompt changes, when the agent's
  system prompt changes (a project instruction file it reads), when a tool answers
  otherwise than it did at recording time, and when the agent's own sub-agent answers
  otherwise;
- a changed prompt accepted keylessly (`dsh-snapshot accept` after the red replay, which runs
  what `record --keep-answers` does): the new request recorded with the recorded answer,
  green again.

Elsewhere (the workspace tests, a machine without the agents) the file skips, saying how to
run it; under the nox session (DSH_THIRD_PARTY_AGENTS=required) a missing agent fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
# agent → its launcher on PATH
AGENTS = {"qwen": "qwen", "vibe": "vibe-acp"}
# What a drifted request's refusal says (dsh-llm-proxy's 422, the run's headline).
DRIFT = ("request drift", "the request's new messages differ from the recording")
TIMEOUT = 900.0


@pytest.fixture(autouse=True)
def _agents_installed() -> None:
    wanted = os.environ.get("DSH_THIRD_PARTY_AGENTS")
    missing = [launcher for launcher in AGENTS.values() if shutil.which(launcher) is None]
    if wanted is None:
        pytest.skip("third-party agents: run `python3 tools/bootstrap.py -s third_party_agents`")
    if missing:
        pytest.fail(f"third-party agents not on PATH: {', '.join(missing)}")


def _gate(*args: str, cwd: Path, wrapper: tuple[str, ...] = ()) -> tuple[int, str, float]:
    """``dsh-snapshot ARGS`` from ``cwd``: exit code, stdout and stderr, seconds."""
    script = Path(sys.executable).with_name("dsh-snapshot")
    started = time.perf_counter()
    run = subprocess.run(
        [*wrapper, str(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env=os.environ | {"COLUMNS": "200"},
    )
    seconds = time.perf_counter() - started
    print(f"dsh-snapshot {' '.join(args[:1])} took {seconds:.1f} s")  # the nox log keeps it
    return run.returncode, run.stdout + run.stderr, seconds


def _copy(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    shutil.copytree(
        SCENARIOS / name, folder, symlinks=True, ignore=shutil.ignore_patterns(".pending")
    )
    return folder


def _red(folder: Path, tmp_path: Path, drift: str) -> str:
    """Replay ``folder`` on one store: it must fail, the refused request as the headline (the
    first failure line), never the consequence ("made 1 of 2 recorded calls")."""
    code, out, _ = _gate("replay", "--store", "jsonl", str(folder), cwd=tmp_path)
    assert code == 1, out
    assert "1 failed" in out, out
    failures = [line for line in out.splitlines() if line.lstrip().startswith("- ")]
    assert failures, out
    assert drift in failures[0], out
    assert "recorded calls" not in failures[0].split(drift)[0], out
    return out


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_green_on_both_stores_a_day_later_from_another_cwd(agent: str, tmp_path: Path) -> None:
    faketime = shutil.which("faketime")
    assert faketime is not None, (
        "the day-later run needs faketime (Debian: apt-get install faketime)"
    )
    folders = sorted(str(p) for p in SCENARIOS.glob(f"{agent}-*"))
    assert len(folders) >= 2
    code, out, _ = _gate(
        "replay", "--jobs", "2", *folders, cwd=tmp_path, wrapper=(faketime, "-f", "+1d")
    )
    assert code == 0, out
    runs = 2 * len(folders)  # each scenario on the jsonl and the sqlite store
    assert f"{runs} passed, 0 failed" in out, out


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_red_when_the_users_prompt_changes(agent: str, tmp_path: Path) -> None:
    folder = _copy(f"{agent}-tool", tmp_path)
    steps = json.loads((folder / "input.json").read_text())
    steps["steps"][-1]["text"] += " Be brief."
    (folder / "input.json").write_text(json.dumps(steps))
    out = _red(folder, tmp_path, DRIFT[1])
    assert "Be brief." in out, out


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_red_when_the_agents_system_prompt_changes(agent: str, tmp_path: Path) -> None:
    folder = _copy(f"{agent}-plain", tmp_path)
    if agent == "qwen":
        # Qwen Code puts the project's QWEN.md into its system prompt.
        (folder / "workspace").mkdir()
        (folder / "workspace" / "QWEN.md").write_text("Always answer in French.\n")
    else:
        # Vibe reads a project's AGENTS.md only in a folder the user trusted, and its unified
        # harness writes its own prompt; a tool the user turns off leaves the prompt.
        meta = folder / "snapshot.yml"
        text = meta.read_text().replace(
            "agent_env:\n", "agent_env:\n  VIBE_DISABLED_TOOLS: '[\"todo\"]'\n", 1
        )
        meta.write_text(text)
    out = _red(folder, tmp_path, DRIFT[0])
    assert "request drift: system: expected" in out, out


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_red_when_a_tool_answers_otherwise(agent: str, tmp_path: Path) -> None:
    folder = _copy(f"{agent}-tool", tmp_path)
    # The recording says the shell printed SNAPSHOT_CHANGED; the live tool prints SNAPSHOT_OK.
    session = folder / "session.jsonl"
    lines = session.read_text().splitlines()
    edited = [
        line.replace("SNAPSHOT_OK", "SNAPSHOT_CHANGED") if '"tool/result"' in line else line
        for line in lines
    ]
    assert edited != lines, "the recording has no tool result to change"
    session.write_text("\n".join(edited) + "\n")
    out = _red(folder, tmp_path, DRIFT[1])
    assert "SNAPSHOT_CHANGED" in out, out


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_red_when_the_sub_agents_answer_changes(agent: str, tmp_path: Path) -> None:
    """The agent's own sub-agent (Qwen's `agent` tool, Vibe's tools.agents.spawn) answers
    otherwise than recorded: its parent's next request, which carries that answer, is refused."""
    folder = _copy(f"{agent}-subagent", tmp_path)
    child = folder / "session.1.jsonl"
    lines = child.read_text().splitlines()
    edited = [
        line.replace("SUBPONG", "SUBPING").replace('"text":"PONG"', '"text":"PING"')
        if '"assistant/' in line
        else line
        for line in lines
    ]
    assert edited != lines, "the recording has no sub-agent answer to change"
    child.write_text("\n".join(edited) + "\n")
    out = _red(folder, tmp_path, DRIFT[1])
    assert "SUBPING" in out, out


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_a_changed_prompt_is_accepted_keylessly_with_the_recorded_answers(
    agent: str, tmp_path: Path
) -> None:
    folder = _copy(f"{agent}-plain", tmp_path)
    steps = json.loads((folder / "input.json").read_text())
    steps["steps"][-1]["text"] = "Reply with exactly the word: PONG. Nothing else."
    (folder / "input.json").write_text(json.dumps(steps))
    _red(folder, tmp_path, DRIFT[1])
    # accept after the red replay: the new request with the recorded answer, keylessly (as
    # `record --keep-answers` does without a failed replay first).
    code, out, _ = _gate("accept", str(folder), cwd=tmp_path)
    assert code == 0, out
    assert "the model was NOT asked again (1 changed request(s)" in out, out
    assert not (folder / ".pending").exists(), out
    assert "Nothing else." in (folder / "session.jsonl").read_text()
    code, out, _ = _gate("replay", "--store", "jsonl", str(folder), cwd=tmp_path)
    assert code == 0, out

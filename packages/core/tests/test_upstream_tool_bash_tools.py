"""Upstream's ``tool-bash/tests/tools.spec.ts`` (June 2026) as conformance cases for ``BashTool``.

Each case names the upstream ``it(...)`` it ports; expected texts are upstream's. The ledger is
in COMPATIBILITY.md § "Upstream unit tests".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    BashResult,
    BashTool,
    CollectedOutput,
    ToolOutcome,
    render_bash_result,
)
from dsh_core.testing import tool_context

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _call(cwd: Path, arguments: dict[str, Any], tool: BashTool | None = None) -> ToolOutcome:
    return await (tool or BashTool(grace_ms=200, spill_dir=cwd)).run(arguments, tool_context(cwd))


def _spilled(text: str) -> str:
    """The contents of the spill file a truncation notice in ``text`` names."""
    path = text.rsplit("full output: ", 1)[1].split("]", 1)[0]
    return Path(path).read_text()


def _bash(command: str, **extra: Any) -> dict[str, Any]:
    return {"command": command, "description": "test command", **extra}


# describe('bash tool') — exact texts
@pytest.mark.parametrize(
    ("case", "arguments", "expected"),
    [
        ("returns stdout for a successful command", _bash("echo hello"), "hello\n"),
        ("reports (no output) for silent commands", _bash("true"), "(no output)"),
        ("marks stderr sections", _bash("echo out; echo err >&2"), "out\n[stderr]\nerr\n"),
        (
            "reports non-zero exits without isError",
            _bash("echo failing; exit 3"),
            "failing\n[exit code: 3]",
        ),
        (
            "reports timeout kills with both markers (timeout first)",
            _bash("sleep 60", timeoutMs=100),
            "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]",
        ),
    ],
)
async def test_bash_tool_texts(
    tmp_path: Path, case: str, arguments: dict[str, Any], expected: str
) -> None:
    assert await _call(tmp_path, arguments) == ToolOutcome(expected, False), case


async def test_a_timeout_is_reported_even_when_the_command_traps_the_signal_and_exits_0(
    tmp_path: Path,
) -> None:
    outcome = await _call(tmp_path, _bash('trap "exit 0" TERM; sleep 60', timeoutMs=100))
    assert not outcome.is_error
    assert "[timed out after 100ms]" in outcome.text
    assert "[exit code:" not in outcome.text


async def test_truncation_is_reported_with_the_spill_path(tmp_path: Path) -> None:
    tool = BashTool(max_output_bytes=100, grace_ms=200, spill_dir=tmp_path)
    command = 'for i in $(seq 1 100); do printf "line-%04d\\n" $i; done'
    outcome = await _call(tmp_path, _bash(command), tool)
    assert "[output truncated; full output: " in outcome.text
    assert "line-0100" in outcome.text
    assert "line-0001" in _spilled(outcome.text)


async def test_workdir_is_honoured(tmp_path: Path) -> None:
    outcome = await _call(tmp_path, _bash("pwd", workdir="/tmp"))
    assert outcome.text.strip().endswith("/tmp")


async def test_spawn_failures_are_errors(tmp_path: Path) -> None:
    outcome = await _call(tmp_path, _bash("true", workdir="/nonexistent-dsh"))
    assert outcome.is_error
    assert "ENOENT" in outcome.text


# 'surfaces aborts as isError': our agent cancels the tool task and logs its own cancelled
# result (test_agent_bash.py::test_cancelling_a_turn_in_bash_kills_it_and_logs_a_cancelled_result).


@pytest.mark.parametrize(
    ("arguments", "pattern"),
    [
        ({}, 'missing required property "command"'),
        ({"command": 42, "description": "d"}, '"command" must be a string'),
        ({"command": "x"}, 'missing required property "description"'),
        ({"command": "x", "description": 7}, '"description" must be a string'),
        ({"command": "x", "description": "d", "timeoutMs": "soon"}, '"timeoutMs" must be a number'),
        ({"command": "x", "description": "d", "workdir": 7}, '"workdir" must be a string'),
        (
            {"command": "x", "description": "d", "run_in_background": "yes"},
            '"run_in_background" must be a boolean',
        ),
        # Value constraints the schema cannot express
        ({"command": "  ", "description": "d"}, "invalid command"),
        ({"command": "x", "description": "   "}, "invalid description"),
        ({"command": "x", "description": "d", "timeoutMs": -1}, "invalid timeoutMs"),
        ({"command": "x", "description": "d", "timeoutMs": math.nan}, "invalid timeoutMs"),
    ],
)
async def test_invalid_arguments_are_errors(
    tmp_path: Path, arguments: dict[str, Any], pattern: str
) -> None:
    outcome = await _call(tmp_path, arguments)
    assert outcome.is_error
    assert outcome.text.startswith("Error: ")
    assert pattern in outcome.text
    # Schema violations are upstream's ToolArgsError (logged as the result's error); value
    # checks in the tool body are plain errors.
    schema = pattern.startswith(("missing", '"'))
    expected = {"name": "ToolArgsError", "code": "INVALID_ARGS"} if schema else None
    assert outcome.error == expected


async def test_run_in_background_is_refused_until_background_tasks_exist(tmp_path: Path) -> None:
    outcome = await _call(tmp_path, _bash("sleep 60", run_in_background=True))
    assert outcome.is_error
    assert "run_in_background is not supported" in outcome.text


# describe('session-cwd routing (per-session workdir)')
async def test_bash_defaults_to_the_session_cwd(tmp_path: Path) -> None:
    assert (await _call(tmp_path, _bash("pwd"))).text == f"{tmp_path}\n"


async def test_an_absolute_workdir_overrides_the_session_cwd(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    assert (await _call(tmp_path, _bash("pwd", workdir=str(other)))).text == f"{other}\n"


async def test_a_relative_workdir_is_resolved_against_the_session_cwd(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert (await _call(tmp_path, _bash("pwd", workdir="sub"))).text == f"{tmp_path}/sub\n"


async def test_two_sessions_with_different_cwds_each_run_in_their_own(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    assert (await _call(first, _bash("pwd"))).text == f"{first}\n"
    assert (await _call(second, _bash("pwd"))).text == f"{second}\n"


# describe('renderResult')
_BASE = BashResult(
    exit_code=0,
    signal=None,
    timed_out=False,
    timeout_ms=1000,
    stdout=CollectedOutput(""),
    stderr=CollectedOutput(""),
)


def _result(**changes: Any) -> BashResult:
    fields = {name: getattr(_BASE, name) for name in BashResult.__slots__}
    return BashResult(**(fields | changes))


@pytest.mark.parametrize(
    ("case", "result", "expected"),
    [
        (
            "renders stderr-only output without a stdout prefix",
            _result(stderr=CollectedOutput("err\n")),
            "[stderr]\nerr\n",
        ),
        (
            "adds a separator when stdout does not end with a newline",
            _result(stdout=CollectedOutput("out"), stderr=CollectedOutput("err")),
            "out\n[stderr]\nerr",
        ),
        (
            "appends exit-code markers after a newline for unterminated output",
            _result(exit_code=7, stdout=CollectedOutput("x")),
            "x\n[exit code: 7]",
        ),
        (
            "renders signal kills without the timeout marker when not timed out",
            _result(exit_code=None, signal="SIGKILL"),
            "(no output)\n[killed by signal: SIGKILL]",
        ),
        (
            "reports a timeout that exited 0 (trapped signal) without a kill marker",
            _result(timed_out=True),
            "(no output)\n[timed out after 1000ms]",
        ),
        (
            "orders the timeout marker before a kill marker",
            _result(exit_code=None, signal="SIGTERM", timed_out=True),
            "(no output)\n[timed out after 1000ms]\n[killed by signal: SIGTERM]",
        ),
        (
            "notes truncation with a fallback when the spill path is missing",
            _result(stdout=CollectedOutput("tail", truncated=True)),
            "tail\n[output truncated; full output: (unavailable)]",
        ),
        (
            "(ours) names the spill file when there is one",
            _result(stderr=CollectedOutput("e", truncated=True, spill_path="/s.log")),
            "[stderr]\ne\n[output truncated; full output: /s.log]",
        ),
    ],
)
def test_render_result(case: str, result: BashResult, expected: str) -> None:
    assert render_bash_result(result) == expected, case


def test_the_schema_requires_command_and_description() -> None:
    # 'registers all three schemas': we register bash only (no background tasks).
    spec = BashTool().spec
    assert spec["name"] == "bash"
    assert spec["parameters"]["required"] == ["command", "description"]
    assert set(spec["parameters"]["properties"]) == {
        "command",
        "description",
        "timeoutMs",
        "workdir",
    }

"""``BashTool`` against real ``bash`` processes in temporary directories."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core import Agent, BashTool, Chunk, CreateOptions, SessionMeta, ToolOutcome
from dsh_core.testing import InMemorySessionStore, ScriptedModel, processes_named, tool_context

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _run(tmp_path: Path, command: str, tool: BashTool | None = None) -> ToolOutcome:
    return await (tool or BashTool()).run(
        {"command": command, "description": "t"}, tool_context(tmp_path)
    )


def _spilled(text: str) -> str:
    """The contents of the spill file a truncation notice in ``text`` names."""
    path = text.rsplit("full output: ", 1)[1].split("]", 1)[0]
    return Path(path).read_text()


async def _wait_gone(token: str) -> bool:
    return await _until(lambda: processes_named(token) == [], fail=False)


async def _until(predicate: Callable[[], bool], *, fail: bool = True) -> bool:
    """Poll ``predicate`` (for effects outside the event loop: files, processes)."""
    for _ in range(1000):
        if predicate():
            return True
        await asyncio.sleep(0.02)
    if fail:
        pytest.fail("the condition never became true")
    return False


async def test_output_is_returned_exactly(tmp_path: Path) -> None:
    assert await _run(tmp_path, "echo SNAPSHOT_OK") == ToolOutcome("SNAPSHOT_OK\n", False)


async def test_runs_in_the_context_cwd_with_stderr_apart_and_empty_stdin(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("here")
    outcome = await _run(tmp_path, "cat marker.txt; echo; echo oops >&2; cat; pwd")
    assert outcome == ToolOutcome(f"here\n{tmp_path}\n[stderr]\noops\n", False)


async def test_non_zero_exit_is_reported_on_its_own_line_not_an_error(tmp_path: Path) -> None:
    assert await _run(tmp_path, "printf partial; exit 3") == ToolOutcome(
        "partial\n[exit code: 3]", False
    )
    assert await _run(tmp_path, "exit 1") == ToolOutcome("(no output)\n[exit code: 1]", False)


async def test_timeout_kills_the_group_and_keeps_partial_output(tmp_path: Path) -> None:
    token = f"dsh-bg-{uuid.uuid4().hex}"
    tool = BashTool(500, grace_ms=200)
    command = f"echo started; (exec -a {token} sleep 60) & wait"
    outcome = await _run(tmp_path, command, tool)
    assert not outcome.is_error
    assert outcome.text == "started\n[timed out after 500ms]\n[killed by signal: SIGTERM]"
    assert await _wait_gone(token)


async def test_output_over_the_cap_keeps_its_tail_with_a_note(tmp_path: Path) -> None:
    tool = BashTool(max_output_bytes=100, spill_dir=tmp_path)
    outcome = await _run(tmp_path, "printf 'x%.0s' $(seq 1 500); printf END", tool)
    assert not outcome.is_error
    body, note = outcome.text.split("\n")
    assert body.endswith("END")
    assert len(body) <= 100
    assert _spilled(note) == "x" * 500 + "END"


async def test_large_output_is_bounded_in_memory(tmp_path: Path) -> None:
    tool = BashTool(max_output_bytes=10, spill_dir=tmp_path)
    outcome = await _run(tmp_path, "head -c 3000000 /dev/zero | tr '\\0' y", tool)
    body, note = outcome.text.split("\n")
    assert body == "y" * 10
    assert note.startswith("[output truncated; full output: ")
    assert len(_spilled(note)) == 3_000_000


async def test_killed_by_a_signal_is_reported(tmp_path: Path) -> None:
    outcome = await _run(tmp_path, "kill -TERM $$")
    assert outcome == ToolOutcome("(no output)\n[killed by signal: SIGTERM]", False)


@pytest.mark.parametrize("command", ["", "   ", None])
async def test_a_missing_command_is_an_error(tmp_path: Path, command: str | None) -> None:
    outcome = await BashTool().run({"command": command, "description": "d"}, tool_context(tmp_path))
    assert outcome.is_error
    assert outcome.text in (
        'Error: invalid arguments: missing required property "command"',
        "Error: invalid command: expected a non-empty string",
    )


async def test_a_missing_cwd_is_an_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    outcome = await BashTool().run({"command": "true", "description": "d"}, tool_context(gone))
    assert outcome == ToolOutcome(
        f"Error: spawn bash ENOENT: the working directory {gone} does not exist", True
    )


async def test_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    token = f"dsh-bg-{uuid.uuid4().hex}"
    task = asyncio.create_task(_run(tmp_path, f"(exec -a {token} sleep 60) & wait"))
    await _until(
        lambda: len(processes_named(token)) >= 2
    )  # bash -c (its command names it) and sleep
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _wait_gone(token)


async def test_cancelling_a_turn_in_bash_kills_it_and_logs_a_cancelled_result(
    tmp_path: Path,
) -> None:
    token = f"dsh-turn-{uuid.uuid4().hex}"
    arguments = json.dumps({"command": f": {token}; sleep 60", "description": "w"})
    script: list[Chunk] = [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "tool-call", "id": "c1", "name": "bash", "arguments": arguments},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    store = InMemorySessionStore()
    agent = Agent(ScriptedModel([[script]]), store, [BashTool()])
    session = store.create(CreateOptions(meta=SessionMeta(cwd=str(tmp_path))))
    task = asyncio.create_task(agent.run_turn(session, "go"))
    await _until(lambda: len(processes_named(token)) >= 1)
    task.cancel()
    outcome = await task
    assert outcome.kind == "aborted"
    assert await _wait_gone(token)
    [result] = [e.data for e in session.events if e.type == "tool/result"]
    assert (result["content"][0]["text"], result["isError"]) == ("cancelled", True)
    assert session.events[-1].data["reason"] == {"kind": "aborted", "reason": "session/cancel"}


def test_spec_and_settings_are_checked() -> None:
    spec = BashTool().spec
    assert spec["name"] == "bash"
    assert spec["parameters"]["required"] == ["command", "description"]
    with pytest.raises(ValueError, match="timeout_ms"):
        BashTool(0)
    with pytest.raises(ValueError, match="max_timeout_ms"):
        BashTool(max_timeout_ms=float("nan"))
    with pytest.raises(ValueError, match="max_output_bytes"):
        BashTool(max_output_bytes=0)
    with pytest.raises(ValueError, match="grace_ms"):
        BashTool(grace_ms=-1)

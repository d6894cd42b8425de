"""Upstream's ``bash-local/tests/run.spec.ts`` (June 2026) as conformance cases.

Upstream tests its process runner (``runBash``) directly; ours is inside ``BashTool``, so each
case asserts what the model then sees (the rendered text), plus :class:`OutputCollector`
directly. Ledger: COMPATIBILITY.md § "Upstream unit tests".
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    BashResult,
    BashTool,
    CollectedOutput,
    OutputCollector,
    render_bash_result,
)
from dsh_core.testing import processes_named, tool_context

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _run(cwd: Path, command: str, tool: BashTool | None = None, **extra: Any) -> str:
    tool = tool or BashTool(grace_ms=200, spill_dir=cwd)
    arguments = {"command": command, "description": "t", **extra}
    outcome = await tool.run(arguments, tool_context(cwd))
    assert not outcome.is_error, outcome.text
    return outcome.text


def _spilled(text: str) -> str:
    """The contents of the spill file a truncation notice in ``text`` names."""
    path = text.rsplit("full output: ", 1)[1].split("]", 1)[0]
    return Path(path).read_text()


def _spill_files(folder: Path) -> list[Path]:
    return list(folder.glob("dsh-bash-*"))


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def _until(predicate: Any) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.02)
    pytest.fail("the condition never became true")


# describe('runBash')
@pytest.mark.parametrize(
    ("case", "command", "expected"),
    [
        ("captures stdout on success", "echo hello", "hello\n"),
        ("captures stderr separately", "echo oops >&2", "[stderr]\noops\n"),
        ("captures both streams", "echo out; echo err >&2", "out\n[stderr]\nerr\n"),
        ("reports non-zero exit codes", "exit 42", "(no output)\n[exit code: 42]"),
        ("applies model-friendly env overrides", 'echo "$NO_COLOR/$TERM/$PAGER"', "1/dumb/cat\n"),
        (
            "reports an externally self-killed command without the timeout marker",
            "kill -TERM $$",
            "(no output)\n[killed by signal: SIGTERM]",
        ),
    ],
)
async def test_run_bash(tmp_path: Path, case: str, command: str, expected: str) -> None:
    assert await _run(tmp_path, command) == expected, case


async def test_runs_in_the_requested_cwd(tmp_path: Path) -> None:
    assert (await _run(tmp_path, "pwd", workdir="/tmp")).strip().endswith("/tmp")


async def test_kills_with_sigterm_on_timeout(tmp_path: Path) -> None:
    text = await _run(tmp_path, "sleep 60", timeoutMs=100)
    assert text == "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"


async def test_escalates_to_sigkill_when_sigterm_is_trapped(tmp_path: Path) -> None:
    text = await _run(tmp_path, "trap '' TERM; sleep 60", timeoutMs=100)
    assert text.endswith("[timed out after 100ms]\n[killed by signal: SIGKILL]")


async def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    token = f"dsh-grandchild-{uuid.uuid4().hex}"
    ready = tmp_path / "ready"
    command = (
        f"(exec -a {token} sleep 60) & until pgrep -f {token}; do :; done; touch {ready}; wait"
    )
    await _run(tmp_path, command, timeoutMs=300)
    assert ready.exists()  # the grandchild did run
    await _until(lambda: processes_named(token) == [])


async def test_cancellation_mid_run_kills_the_group(tmp_path: Path) -> None:
    # 'aborts via AbortSignal mid-run': our abort is the cancellation of the tool's task.
    token = f"dsh-grandchild-{uuid.uuid4().hex}"
    task = asyncio.create_task(_run(tmp_path, f"(exec -a {token} sleep 60) & wait"))
    # bash -c, whose command line names the token, and the grandchild
    await _until(lambda: len(processes_named(token)) >= 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _until(lambda: processes_named(token) == [])


async def test_a_nonexistent_cwd_is_a_spawn_error(tmp_path: Path) -> None:
    outcome = await BashTool().run(
        {"command": "echo hi", "description": "t"}, tool_context(tmp_path / "gone")
    )
    assert outcome.is_error
    assert "ENOENT" in outcome.text


# describe('output truncation and spill')
_LINES = 'for i in $(seq 1 200); do printf "line-%04d\\n" $i; done'


async def test_keeps_the_tail_and_spills_the_full_stream(tmp_path: Path) -> None:
    tool = BashTool(max_output_bytes=500, spill_dir=tmp_path)
    text = await _run(tmp_path, _LINES, tool)
    body = text.rsplit("\n[output truncated; full output: ", 1)[0]
    assert len(body.encode()) <= 500
    assert "line-0200" in body
    assert "line-0001" not in body
    full = _spilled(text)
    assert "line-0001" in full
    assert "line-0200" in full


async def test_output_exactly_at_the_cap_is_not_truncated(tmp_path: Path) -> None:
    tool = BashTool(max_output_bytes=500, spill_dir=tmp_path)
    assert await _run(tmp_path, "printf '%.0sx' $(seq 1 500)", tool) == "x" * 500
    assert _spill_files(tmp_path) == []


# describe('OutputCollector')
def test_a_single_oversized_chunk_keeps_its_tail(tmp_path: Path) -> None:
    collector = OutputCollector(10, "test", tmp_path)
    collector.push(b"0123456789abcdef")
    out = collector.finalize()
    assert (out.text, out.truncated) == ("6789abcdef", True)
    assert out.spill_path is not None
    assert Path(out.spill_path).read_text() == "0123456789abcdef"


def test_total_bytes_are_tracked_across_drops(tmp_path: Path) -> None:
    collector = OutputCollector(4, "test", tmp_path)
    collector.push(b"aaaa")
    collector.push(b"bbbb")
    assert collector.total_bytes == 8
    assert collector.finalize().text == "bbbb"


def test_a_close_failure_drops_the_spill_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collector = OutputCollector(4, "closefail", tmp_path)
    collector.push(b"aaaa")
    collector.push(b"bbbb")
    real_close = os.close

    def failing_close(fd: int) -> None:
        real_close(fd)
        raise OSError(5, "simulated EIO on close")

    monkeypatch.setattr(os, "close", failing_close)
    out = collector.finalize()
    monkeypatch.undo()
    assert (out.text, out.truncated, out.spill_path) == ("bbbb", True, None)


# describe('review fixes: env scrubbing and spill hardening')
async def test_credential_shaped_variables_do_not_reach_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_TEST_API_KEY", "super-secret")
    monkeypatch.setenv("DSH_TEST_TOKEN", "also-secret")
    text = await _run(tmp_path, 'echo "[${DSH_TEST_API_KEY:-absent}|${DSH_TEST_TOKEN:-absent}]"')
    assert text == "[absent|absent]\n"


async def test_spill_files_are_owner_only_with_random_names(tmp_path: Path) -> None:
    tool = BashTool(max_output_bytes=500, spill_dir=tmp_path)
    text = await _run(tmp_path, _LINES, tool)
    path = text.rsplit("full output: ", 1)[1].rstrip("]")
    assert re.search(r"dsh-bash-\d+-\d+-[0-9a-f]{12}-stdout\.log$", path)
    assert _mode(path) == 0o600


async def test_spills_default_to_the_runs_private_temp_dir(tmp_path: Path) -> None:
    # Inside the run (removed with it, visible to the next command), never a shared temp dir.
    tool = BashTool(max_output_bytes=500)
    text = await _run(tmp_path, _LINES, tool)
    path = Path(text.rsplit("full output: ", 1)[1].rstrip("]"))
    assert path.parent == tool.sandbox.tmp
    assert _mode(str(path.parent)) == 0o700
    base = tool.sandbox.tmp.parent
    del tool
    assert not path.exists()  # noqa: ASYNC240 - a test's check
    assert not base.exists()


def test_a_spill_file_stops_growing_at_its_cap(tmp_path: Path) -> None:
    collector = OutputCollector(4, "capped", tmp_path, max_spill_bytes=10)
    for _ in range(5):
        collector.push(b"abcd")
    out = collector.finalize()
    assert (out.text, out.truncated, out.spill_capped_at) == ("abcd", True, 10)
    assert out.spill_path is not None
    assert Path(out.spill_path).read_bytes() == b"abcdabcdab"
    shown = render_bash_result(BashResult(0, None, False, 1.0, out, CollectedOutput("")))
    assert shown == f"abcd\n[output truncated; first 10 bytes: {out.spill_path}]"


# executor.spec.ts, describe('LocalBashExecutor.run'): the limits BashTool resolves per call
async def test_a_calls_timeout_is_capped_at_max_timeout_ms(tmp_path: Path) -> None:
    tool = BashTool(1_000, max_timeout_ms=200, grace_ms=200, spill_dir=tmp_path)
    text = await _run(tmp_path, "sleep 60", tool, timeoutMs=99_999)
    assert text == "(no output)\n[timed out after 200ms]\n[killed by signal: SIGTERM]"


async def test_a_calls_own_timeout_wins_under_the_cap(tmp_path: Path) -> None:
    tool = BashTool(60_000, grace_ms=200, spill_dir=tmp_path)
    text = await _run(tmp_path, "sleep 60", tool, timeoutMs=100)
    assert "[timed out after 100ms]" in text

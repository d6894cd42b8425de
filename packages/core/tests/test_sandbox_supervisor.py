"""The supervisor inside the sandbox, perl and Python alike: real bubblewrap, real commands.

Bubblewrap reports a command killed by signal N as exit code 128+N; the supervisor tells the
two apart, relays the host's signals to the command's group and starts the command with the
default signal dispositions. Perl's (~2 ms to start) is used wherever perl exists, the
Python one elsewhere: both must behave the same.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dsh_core import BashTool, SandboxSettings, ToolOutcome, ToolSandbox
from dsh_core._sandbox import Supervisor, _bwrap, _perl
from dsh_core.testing import tool_context

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("needs_sandbox")]

_KINDS: list[Supervisor] = ["perl", "python"]


@pytest.fixture(params=_KINDS)
def kind(request: pytest.FixtureRequest) -> Supervisor:
    chosen: Supervisor = request.param
    if chosen == "perl" and _perl() is None and os.environ.get("CI") != "true":
        pytest.skip("perl is not on PATH")
    return chosen


def _sandbox(kind: Supervisor, **source: str) -> ToolSandbox:
    settings = SandboxSettings(sandbox="strict", sandbox_network="deny")
    env = {"PATH": os.environ.get("PATH", os.defpath), **source}
    return ToolSandbox(settings, source_env=env, supervisor=kind)


async def _bash(kind: Supervisor, cwd: Path, command: str, **source: str) -> str:
    tool = BashTool(sandbox=_sandbox(kind, **source), grace_ms=200)
    arguments = {"command": command, "description": "t", "timeoutMs": 400}
    outcome = await tool.run(arguments, tool_context(cwd, [tool]))
    assert not outcome.is_error, outcome.text
    return outcome.text


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("kill -TERM $$", "(no output)\n[killed by signal: SIGTERM]"),
        ("exit 143", "(no output)\n[exit code: 143]"),
        ("kill -KILL $$", "(no output)\n[killed by signal: SIGKILL]"),
        ("sleep 30", "(no output)\n[timed out after 400ms]\n[killed by signal: SIGTERM]"),
        (
            "trap '' TERM; sleep 30",
            "(no output)\n[timed out after 400ms]\n[killed by signal: SIGKILL]",
        ),
        # Default dispositions: `yes` dies of SIGPIPE quietly, no "Broken pipe" on stderr.
        ("yes | head -n 1", "y\n"),
    ],
    ids=["self-sigterm", "exit-143", "self-sigkill", "timeout", "trapped-timeout", "sigpipe"],
)
async def test_the_command_s_own_end_is_reported(
    kind: Supervisor, tmp_path: Path, command: str, expected: str
) -> None:
    assert await _bash(kind, tmp_path, command) == expected


async def test_a_missing_locale_says_nothing_and_the_command_sees_no_extra_variable(
    kind: Supervisor, tmp_path: Path
) -> None:
    # A locale the system lacks would make perl warn on stderr at every start.
    command = 'echo "${PERL_BADLANG-unset} $LC_ALL"'
    text = await _bash(kind, tmp_path, command, LC_ALL="xx_YY.UTF-8")
    assert text.startswith("unset xx_YY.UTF-8\n")
    assert "perl" not in text  # (bash itself may say it cannot set the locale)


async def test_a_variable_the_user_passes_is_kept(kind: Supervisor, tmp_path: Path) -> None:
    settings = SandboxSettings(sandbox="strict", tool_env_allow="PERL_BADLANG")
    sandbox = ToolSandbox(settings, source_env={"PERL_BADLANG": "mine"}, supervisor=kind)
    tool = BashTool(sandbox=sandbox)
    arguments = {"command": "echo $PERL_BADLANG", "description": "t"}
    assert await tool.run(arguments, tool_context(tmp_path, [tool])) == ToolOutcome("mine\n")


def test_a_command_that_cannot_start_is_127_with_a_line(kind: Supervisor, tmp_path: Path) -> None:
    sandbox = _sandbox(kind)  # held: its private folders live as long as it does
    confined = sandbox.confine(["no-such-command-anywhere"], str(tmp_path), supervised=True)
    with subprocess.Popen(
        confined.argv, env=confined.env, stderr=subprocess.PIPE, pass_fds=confined.pass_fds
    ) as started:
        confined.started()
        _, stderr = started.communicate(timeout=60)
    done = subprocess.CompletedProcess(started.args, started.returncode, "", stderr.decode())
    assert done.returncode == 0  # the supervisor itself ended well...
    assert confined.wait_status() == 127 << 8  # ...and says the command exited 127
    assert done.stderr.startswith("dsh sandbox: cannot run no-such-command-anywhere: ")
    confined.close()


def test_asking_for_perl_where_there_is_none_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _bwrap()  # looked up with the real PATH (cached), as a run would have it
    _perl.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        with pytest.raises(Exception, match="perl is not on PATH"):
            _sandbox("perl").confine(["true"], str(tmp_path), supervised=True)
    finally:
        _perl.cache_clear()

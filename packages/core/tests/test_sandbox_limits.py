"""Resource limits inside the sandbox, against real bubblewrap: a command cannot exhaust the host.

Each hostile case runs a real process under ``bwrap`` (strict), with small limits where the
default would make the test slow, and checks that it ends within its timeout and that no
process of it is left (by a token in its command line). In CI a missing mechanism fails them.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import ValidationError

from dsh_core import BashTool, SandboxSettings, SandboxUnavailableError, ToolSandbox
from dsh_core import _sandbox as sandbox_module
from dsh_core._sandbox import Supervisor, _perl
from dsh_core._sandbox_limits import ResourceLimits
from dsh_core.testing import processes_named, tool_context

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("needs_sandbox")]
PY = sys.executable
GIB = 1 << 30


def _settings(**limits: object) -> SandboxSettings:
    return SandboxSettings.model_validate(
        {"sandbox": "strict", "sandbox_network": "deny", **limits}
    )


def _run(
    argv: Sequence[str],
    cwd: Path,
    settings: SandboxSettings | None = None,
    *,
    supervisor: Supervisor = "auto",
    supervised: bool = False,
) -> subprocess.CompletedProcess[str]:
    sandbox = ToolSandbox(settings or _settings(), supervisor=supervisor)
    confined = sandbox.confine(argv, str(cwd), supervised=supervised)
    try:
        return subprocess.run(
            confined.argv,
            env=confined.env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            pass_fds=confined.pass_fds,
            timeout=60,
            check=False,
        )
    finally:
        confined.close()


async def _gone(token: str) -> bool:
    for _ in range(500):
        if not processes_named(token):
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    cwd = tmp_path / "run"
    cwd.mkdir()
    return cwd


_KINDS = [
    pytest.param("perl", True, id="perl-supervised"),
    pytest.param("python", True, id="python-supervised"),
    pytest.param("auto", False, id="unsupervised"),
]


@pytest.mark.parametrize(("kind", "supervised"), _KINDS)
def test_every_limit_is_set_and_cannot_be_raised(
    run_dir: Path, kind: Supervisor, supervised: bool
) -> None:
    if kind == "perl" and _perl() is None and os.environ.get("CI") != "true":
        pytest.skip("perl is not on PATH")
    settings = _settings(
        sandbox_memory="1GiB", sandbox_file_size="64MiB", sandbox_processes=77,
        sandbox_open_files=99, sandbox_shm="8MiB",
    )  # fmt: skip
    script = (
        "ulimit -d; ulimit -f; ulimit -u; ulimit -n; ulimit -c; ulimit -Hn; "
        "df -k --output=size /dev/shm | tail -1; ulimit -n 100 2>/dev/null || echo fixed"
    )
    done = _run(["bash", "-c", script], run_dir, settings, supervisor=kind, supervised=supervised)
    # KiB for -d, 1 KiB blocks (bash) for -f.
    expected = ["1048576", "65536", "77", "99", "0", "99", "8192", "fixed"]
    assert done.stdout.split() == expected, done.stderr


_FORKER = (
    "import os, sys, time\n"
    "made = 0\n"
    "try:\n"
    "    while made < 1000:\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(60)\n"
    "            os._exit(0)\n"
    "        made += 1\n"
    "except OSError as exc:\n"
    "    print(made, exc.errno)\n"
)  # forks children that wait until a fork fails, then says how many it made


@pytest.mark.skipif(os.geteuid() == 0, reason="RLIMIT_NPROC never holds for root (see below)")
def test_a_fork_bomb_stops_at_the_process_limit(run_dir: Path) -> None:
    token = f"dsh-limit-{uuid.uuid4().hex}"
    done = _run([PY, "-c", _FORKER, token], run_dir, _settings(sandbox_processes=32))
    made, errno = done.stdout.split()
    assert errno == "11"  # EAGAIN: the cap, not the loop's end
    assert 20 <= int(made) < 32, done.stdout
    assert asyncio.run(_gone(token))


@pytest.mark.parametrize("kind", ["perl", "python"])
@pytest.mark.parametrize("supervised", [True, False], ids=["supervised", "unsupervised"])
def test_past_the_process_cap_the_watching_supervisor_kills_them_all(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, kind: Supervisor, supervised: bool
) -> None:
    # What holds where RLIMIT_NPROC does not (the host's root): forced on here for any user.
    if kind == "perl" and _perl() is None and os.environ.get("CI") != "true":
        pytest.skip("perl is not on PATH")
    monkeypatch.setattr(ResourceLimits, "watched", property(lambda self: self.processes))
    token = f"dsh-limit-{uuid.uuid4().hex}"
    settings = _settings(sandbox_processes=32)
    argv = [PY, "-c", _FORKER, token]
    done = _run(argv, run_dir, settings, supervisor=kind, supervised=supervised)
    assert "dsh sandbox: more than 32 processes: the command is killed" in done.stderr
    assert done.stdout == ""  # killed before its fork failed
    if not supervised:
        assert done.returncode == 128 + 9
    assert asyncio.run(_gone(token))


async def test_a_classic_fork_bomb_ends_leaving_nothing(run_dir: Path) -> None:
    token = f"dsh-limit-{uuid.uuid4().hex}"
    tool = BashTool(sandbox=ToolSandbox(_settings(sandbox_processes=64)), grace_ms=100)
    # The shell that starts it stays (else its exit would end the sandbox, bomb and all).
    command = f"exec -a {token} bash -c 'b() {{ b | b & }}; b; sleep 30'"
    arguments = {"command": command, "description": "t", "timeoutMs": 1500}
    outcome = await tool.run(arguments, tool_context(run_dir, [tool]))
    # Capped by RLIMIT_NPROC, it forks on until its timeout; as root, the watcher kills it.
    ended = ("[timed out after 1500ms]", "more than 64 processes: the command is killed")
    assert any(reason in outcome.text for reason in ended), outcome.text
    assert await _gone(token)


def test_a_2_gib_file_cannot_be_written(run_dir: Path) -> None:
    # The default cap (1 GiB). Sparse: the write past the cap is refused at once, whatever
    # the disk holds; SIGXFSZ (the default disposition) kills the writer.
    script = "f = open('big', 'wb'); f.seek(2 << 30); f.write(b'x'); f.close()"
    done = _run([PY, "-c", script], run_dir)
    assert done.returncode != 0
    assert (run_dir / "big").stat().st_size < GIB
    shell = _run(["sh", "-c", "truncate -s 2G wide"], run_dir)
    assert shell.returncode != 0
    assert "File size limit exceeded" in shell.stderr  # SIGXFSZ
    assert (run_dir / "wide").stat().st_size == 0


def test_a_huge_allocation_fails(run_dir: Path) -> None:
    # The default cap (4 GiB of private memory): refused when asked, nothing touched.
    script = (
        "import mmap\n"
        "try:\n"
        "    bytearray(8 << 30)\n"
        "except MemoryError:\n"
        "    print('heap refused')\n"
        "try:\n"
        "    mmap.mmap(-1, 8 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
        "except OSError as exc:\n"
        "    print('mapping refused', exc.errno)\n"
    )
    done = _run([PY, "-c", script], run_dir)
    assert done.stdout.splitlines() == ["heap refused", "mapping refused 12"], done.stderr


def test_dev_shm_fills_only_to_its_cap_and_dev_is_read_only(run_dir: Path) -> None:
    script = (
        "dd if=/dev/zero of=/dev/shm/fill bs=1M count=64 2>&1 | grep -o 'No space left'; "
        "stat -c %s /dev/shm/fill; touch /dev/planted 2>&1 | grep -o 'Read-only'"
    )
    done = _run(["bash", "-c", script], run_dir, _settings(sandbox_shm="4MiB"))
    assert done.stdout.split("\n")[:3] == ["No space left", str(4 << 20), "Read-only"]


def test_open_files_stop_at_the_cap(run_dir: Path) -> None:
    script = (
        "import os\n"
        "opened = []\n"
        "try:\n"
        "    while len(opened) < 10000:\n"
        "        opened.append(os.open('/dev/null', os.O_RDONLY))\n"
        "except OSError as exc:\n"
        "    print(len(opened), exc.errno)\n"
    )
    done = _run([PY, "-c", script], run_dir, _settings(sandbox_open_files=64))
    count, errno = done.stdout.split()
    assert (int(count) < 64, errno) == (True, "24")  # EMFILE


def test_a_crash_leaves_no_core_dump(run_dir: Path) -> None:
    done = _run(["bash", "-c", "ulimit -c; sh -c 'kill -SEGV $$'; ls"], run_dir)
    assert done.stdout.split() == ["0"]  # and no core file in the cwd


def test_limits_reach_the_python_supervisor_where_perl_cannot_set_them(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An architecture whose prlimit64 number is not known: perl cannot call it.
    monkeypatch.setattr(sandbox_module, "prlimit_syscall", lambda: None)
    settings = _settings(sandbox_open_files=55)
    assert _run(["sh", "-c", "ulimit -n"], run_dir, settings).stdout == "55\n"
    with pytest.raises(SandboxUnavailableError, match="prlimit64"):
        ToolSandbox(settings, supervisor="perl").confine(["true"], str(run_dir))


def test_bad_limit_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SANDBOX_MEMORY", "lots")
    with pytest.raises(ValidationError, match="sandbox_memory"):
        SandboxSettings()
    monkeypatch.setenv("DSH_SANDBOX_MEMORY", "512MiB")
    monkeypatch.setenv("DSH_SANDBOX_PROCESSES", "0")
    limits = SandboxSettings().limits
    assert (limits.memory, limits.processes) == (512 << 20, 0)

"""The sandbox policy against real bubblewrap: what a confined command cannot do.

Every probe runs a real process under ``bwrap`` and checks the host afterwards. In CI
(``CI=true``) a missing bubblewrap fails these tests instead of skipping them: the gate runs
strict there, and so do they.
"""

from __future__ import annotations

import asyncio
import os
import pty
import select
import socket
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from dsh_core import BashTool, SandboxSettings, ToolOutcome, ToolSandbox
from dsh_core import _sandbox_fs as sandbox_fs
from dsh_core._sandbox import _bwrap, _perl
from dsh_core.testing import processes_named, tool_context

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("needs_sandbox")]
PY = sys.executable


@pytest.fixture
def sandbox() -> ToolSandbox:
    return ToolSandbox(SandboxSettings(sandbox="strict", sandbox_network="deny"))


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    cwd = tmp_path / "run"
    cwd.mkdir()
    return cwd


def _run(
    sandbox: ToolSandbox,
    argv: Sequence[str],
    cwd: Path,
    *,
    readable: Sequence[Path] = (),
    stdin: int = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    confined = sandbox.confine(argv, str(cwd), readable=[str(p) for p in readable])
    try:
        return subprocess.run(
            confined.argv,
            env=confined.env,
            cwd=cwd,
            stdin=stdin,
            capture_output=True,
            text=True,
            pass_fds=confined.pass_fds,
            timeout=60,
            check=False,
        )
    finally:
        confined.close()


def _python(sandbox: ToolSandbox, code: str, cwd: Path, **kwargs: object) -> str:
    """Run ``code`` in a confined interpreter; what it printed (stdout, then stderr)."""
    done = _run(sandbox, [PY, "-I", "-c", code], cwd, **kwargs)  # type: ignore[arg-type]
    return done.stdout + done.stderr


def _state(path: Path) -> tuple[int, int, bytes, list[str]]:
    info = path.stat()
    return (info.st_mode, info.st_mtime_ns, path.read_bytes(), sorted(os.listxattr(path)))


async def _gone(token: str) -> bool:
    """Whether every process named ``token`` has ended. A process that closed its pipes may
    still be finishing its exit for a moment after the tool returned: poll (bounded)."""
    for _ in range(500):
        if not processes_named(token):
            return True
        await asyncio.sleep(0.02)
    return False


# --- the file system ------------------------------------------------------------------------


def test_metadata_outside_the_run_cannot_change(
    sandbox: ToolSandbox, run_dir: Path, tmp_path: Path
) -> None:
    # The folder is made visible (read-only), so each call reaches the file and is refused.
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "kept"
    target.write_text("sentinel")
    before = _state(target)
    code = f"""
import asyncio
import os
for name, call in [
    ("chmod", lambda: os.chmod({str(target)!r}, 0o777)),
    ("utime", lambda: os.utime({str(target)!r}, (0, 0))),
    ("setxattr", lambda: os.setxattr({str(target)!r}, "user.dsh", b"x")),
    ("write", lambda: open({str(target)!r}, "a").write("x")),
    ("rename", lambda: os.rename({str(target)!r}, {str(target)!r} + ".moved")),
    ("mkdir", lambda: os.mkdir({str(outside / "d")!r})),
]:
    try:
        call()
        print(name, "succeeded")
    except OSError as exc:
        print(name, exc.strerror)
"""
    printed = _python(sandbox, code, run_dir, readable=[outside])
    assert printed.splitlines() == [
        f"{name} Read-only file system"
        for name in ("chmod", "utime", "setxattr", "write", "rename", "mkdir")
    ]
    assert _state(target) == before
    assert sorted(p.name for p in outside.iterdir()) == ["kept"]


def test_the_host_tmp_and_run_are_hidden_and_read_only(
    sandbox: ToolSandbox, run_dir: Path, tmp_path: Path
) -> None:
    hidden = tmp_path / "hidden"
    hidden.write_text("outside")
    command = (
        f"cat {hidden}; ls -A /run | wc -l; echo x > /tmp/new; echo y > /run/new; "
        'echo ok > here && echo home > "$HOME/h" && echo tmp > "$TMPDIR/t" && cat here "$HOME/h" '
        '"$TMPDIR/t"'
    )
    done = _run(sandbox, ["bash", "-c", command], run_dir)
    assert done.stdout == "0\nok\nhome\ntmp\n"
    assert "No such file or directory" in done.stderr
    assert done.stderr.count("Read-only file system") == 2
    assert hidden.read_text() == "outside"
    assert (run_dir / "here").read_text() == "ok\n"


# --- sockets, terminal, network -----------------------------------------------------------


def test_a_pathname_unix_socket_outside_cannot_be_reached(
    sandbox: ToolSandbox, run_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "sockets"
    outside.mkdir()
    path = outside / "service.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen()
        code = f"""
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect({str(path)!r})
print("connected")
"""
        # Visible (the folder is bound read-only): only the seccomp filter stands in the way.
        printed = _python(sandbox, code, run_dir, readable=[outside])
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert "connected" not in printed
    assert "Address family not supported by protocol" in printed


def test_an_abstract_unix_socket_outside_cannot_be_reached(
    sandbox: ToolSandbox, run_dir: Path
) -> None:
    name = f"\0dsh-sandbox-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(name)
        server.listen()
        code = f"""
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect({name!r})
print("connected")
"""
        printed = _python(sandbox, code, run_dir)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert "connected" not in printed
    assert "Address family not supported by protocol" in printed


_IO_URING_SETUP = """
import ctypes, os
params = ctypes.create_string_buffer(120)
fd = ctypes.CDLL(None, use_errno=True).syscall(425, 4, params)
print("fd" if fd >= 0 else os.strerror(ctypes.get_errno()))
"""


def test_io_uring_does_not_exist_inside(sandbox: ToolSandbox, run_dir: Path) -> None:
    # io_uring makes and connects a Unix socket without socket(2), past the filter's rule on
    # it (red team F2): the filter must refuse io_uring itself.
    unconfined = subprocess.run(
        [PY, "-c", _IO_URING_SETUP], capture_output=True, text=True, check=True
    )
    if unconfined.stdout.strip() == os.strerror(38):
        pytest.skip("this kernel has no io_uring")
    assert _python(sandbox, _IO_URING_SETUP, run_dir) == f"{os.strerror(38)}\n"  # ENOSYS


def test_tiocsti_types_nothing_into_a_terminal(sandbox: ToolSandbox, run_dir: Path) -> None:
    # The sandbox gets a terminal as stdin (a foreign agent may inherit one): TIOCSTI on it
    # must fail, and nothing may reach the terminal's reader.
    master, slave = pty.openpty()
    try:
        code = """
import fcntl, termios
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"X")
    print("typed")
except OSError as exc:
    print("refused", exc.strerror)
"""
        printed = _python(sandbox, code, run_dir, stdin=slave)
        ready, _, _ = select.select([master], [], [], 0)
    finally:
        os.close(slave)
        os.close(master)
    assert printed == "refused Operation not permitted\n"
    assert ready == []


def test_no_network_not_even_the_hosts_loopback(sandbox: ToolSandbox, run_dir: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), 5)
    print("connected")
except OSError as exc:
    print("refused", exc.strerror)
"""
        printed = _python(sandbox, code, run_dir)
        allowed = ToolSandbox(SandboxSettings(sandbox="strict", sandbox_network="allow"))
        # The same probe reaches the listener when the network is shared: this test can fail.
        assert _python(allowed, code, run_dir) == "connected\n"
    assert printed == "refused Connection refused\n"


# --- processes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spawn",
    [
        "(exec -a {token} sleep 1000) &",
        "setsid bash -c 'exec -a {token} sleep 1000' &",
        "( ( exec -a {token} sleep 1000 & ) & )",
        "nohup bash -c 'exec -a {token} sleep 1000' >/dev/null 2>&1 &",
    ],
    ids=["background", "setsid", "double-fork", "nohup"],
)
async def test_nothing_outlives_a_command(sandbox: ToolSandbox, run_dir: Path, spawn: str) -> None:
    token = f"dsh-probe-{uuid.uuid4().hex}"
    tool = BashTool(sandbox=sandbox)
    # Wait (inside) until the child runs, so the check below is about a child that existed.
    command = f"{spawn.format(token=token)}\nuntil pgrep -f {token} >/dev/null; do sleep 0.05; done"
    arguments = {"command": command + "; echo running", "description": "t"}
    outcome = await tool.run(arguments, tool_context(run_dir, [tool]))
    assert outcome == ToolOutcome("running\n")  # the child did start
    assert await _gone(token)


async def test_a_command_past_its_timeout_is_killed_with_its_children(
    sandbox: ToolSandbox, run_dir: Path
) -> None:
    token = f"dsh-probe-{uuid.uuid4().hex}"
    tool = BashTool(sandbox=sandbox, grace_ms=100)
    command = f"setsid bash -c 'exec -a {token} sleep 1000' & trap '' TERM; sleep 1000"
    arguments = {"command": command, "description": "t", "timeoutMs": 300}
    outcome = await tool.run(arguments, tool_context(run_dir, [tool]))
    assert outcome.text.startswith("(no output)\n[timed out after 300ms]")
    assert await _gone(token)


# --- spill files -----------------------------------------------------------------------------


async def test_long_output_spills_inside_the_run_and_is_removed_with_it(run_dir: Path) -> None:
    sandbox = ToolSandbox(SandboxSettings(sandbox="strict", sandbox_network="deny"))
    tool = BashTool(sandbox=sandbox)
    arguments = {"command": "head -c 100000 /dev/zero | tr '\\0' a", "description": "t"}
    outcome = await tool.run(arguments, tool_context(run_dir, [tool]))
    notice = outcome.text.rsplit("\n", 1)[-1]
    spill = Path(notice.removeprefix("[output truncated; full output: ").removesuffix("]"))
    assert spill.parent == sandbox.tmp
    assert spill.read_bytes() == b"a" * 100_000  # noqa: ASYNC240 - a test's check
    # The next command sees it where the notice says.
    again = {"command": f"wc -c < {spill}", "description": "t"}
    assert await tool.run(again, tool_context(run_dir, [tool])) == ToolOutcome("100000\n")
    base = sandbox.tmp.parent
    del tool, sandbox
    assert not base.exists()


def test_a_relative_cwd_is_the_run_folder(
    sandbox: ToolSandbox, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # BashTool() with SessionMeta(cwd=".") (the core README's example) confines a relative
    # cwd: bubblewrap would resolve it against its own new root, binding over the hidden /tmp.
    monkeypatch.chdir(run_dir)
    confined = sandbox.confine(["sh", "-c", "pwd; echo x > made.txt"], ".")
    try:
        done = subprocess.run(
            confined.argv,
            env=confined.env,
            capture_output=True,
            text=True,
            pass_fds=confined.pass_fds,
            timeout=60,
            check=False,
        )
    finally:
        confined.close()
    assert (done.returncode, done.stdout.strip()) == (0, str(run_dir)), done.stderr
    assert (run_dir / "made.txt").read_text() == "x\n"


def test_a_hidden_checkout_is_unreadable_but_what_it_must_lend_stays(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gate hides the checkout it runs from (its .env holds the key, its .git a CI token:
    # red team F3); what a command needs from inside it (a virtual environment) stays visible.
    # The host's /tmp (where this test's folders are) is left visible here, so that only the
    # hiding of the checkout itself can make the reads fail.
    monkeypatch.setattr(sandbox_fs, "HIDDEN_DIRS", ())
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "config").write_text("extraheader = AUTHORIZATION: basic x\n")
    (checkout / ".env").write_text("API_KEY=not-for-commands\n")
    lent = checkout / ".venv"
    lent.mkdir()
    (lent / "tool.txt").write_text("lent\n")
    settings = SandboxSettings(sandbox="strict", sandbox_network="deny", sandbox_hide=str(checkout))
    script = f"cat {checkout}/.env {checkout}/.git/config; cat {lent}/tool.txt; ls -A {checkout}"
    done = _run(ToolSandbox(settings), ["sh", "-c", script], run_dir, readable=[lent])
    assert "not-for-commands" not in done.stdout
    assert "extraheader" not in done.stdout
    assert done.stdout == "lent\n.venv\n", done.stderr
    assert "No such file" in done.stderr


# --- the launcher ----------------------------------------------------------------------------


async def test_a_program_planted_in_the_run_never_starts_on_the_host(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A relative PATH entry (`./node_modules/.bin`, common in a developer's shell) is resolved
    # against the cwd a process starts in: the run's, which holds the scenario's workspace.
    # bubblewrap and the supervisor must be found by absolute path, and bubblewrap must not
    # start with the command's LD_LIBRARY_PATH (red team F1, p17).
    ran = tmp_path / "planted-ran"
    planted = run_dir / "bin"
    planted.mkdir()
    for name in ("bwrap", "perl", "env", "python3"):
        (planted / name).write_text(f"#!/bin/sh\necho {name} >> {ran}\nexit 1\n")
        (planted / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"bin:{os.environ.get('PATH', os.defpath)}")
    _bwrap.cache_clear()
    _perl.cache_clear()
    try:
        source = {"PATH": "bin::/usr/bin:/bin", "LD_LIBRARY_PATH": str(planted)}
        settings = SandboxSettings(sandbox="strict", sandbox_network="deny")
        tool = BashTool(sandbox=ToolSandbox(settings, source_env=source))
        arguments = {"command": "/bin/echo ran", "description": "t"}
        outcome = await tool.run(arguments, tool_context(run_dir, [tool]))
    finally:
        _bwrap.cache_clear()
        _perl.cache_clear()
    assert outcome == ToolOutcome("ran\n")
    assert not ran.exists(), ran.read_text()

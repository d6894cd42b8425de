"""The ``bash`` tool's environment and sandbox, against real ``bash`` processes."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import string
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import dsh_core
from dsh_core import (
    BashTool,
    SandboxMechanisms,
    SandboxSettings,
    ToolOutcome,
    ToolSandbox,
    is_secret_name,
    tool_environment,
)
from dsh_core._sandbox import probe_mechanisms
from dsh_core.testing import tool_context

pytestmark = pytest.mark.anyio

_WRAPPER = Path(dsh_core.__file__).with_name("_sandbox_exec.py")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _fake_key() -> str:
    alphabet = string.ascii_letters + string.digits
    return "sk-" + "".join(secrets.choice(alphabet) for _ in range(40))


async def _bash(cwd: Path, command: str, tool: BashTool) -> ToolOutcome:
    return await tool.run({"command": command, "description": "t"}, tool_context(cwd, [tool]))


def _tool(mode: str = "strict", network: str = "deny", **kwargs: object) -> BashTool:
    settings = SandboxSettings(sandbox=mode, sandbox_network=network)  # type: ignore[arg-type]
    return BashTool(sandbox=ToolSandbox(settings, **kwargs))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def mechanisms() -> SandboxMechanisms:
    found = asyncio.run(probe_mechanisms())
    if found.landlock_abi < 1 or found.netns_problem is not None:
        pytest.skip(f"this system lacks a sandbox mechanism: {found}")
    return found


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections (the backlog answers them)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


# --- environment ----------------------------------------------------------------------------


async def test_env_holds_no_secret_and_a_private_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = _fake_key()
    for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "MY_PASSWORD", "DSH_X"):
        monkeypatch.setenv(name, key)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    tool = _tool("off")
    outcome = await _bash(tmp_path, "env; printenv DEEPSEEK_API_KEY", tool)
    assert key not in outcome.text
    assert outcome.text.endswith("[exit code: 1]")  # printenv of an unset variable exits 1
    env = dict(line.split("=", 1) for line in outcome.text.splitlines() if "=" in line)
    assert env["HOME"] == str(tool.sandbox.home) != str(Path.home())
    assert env["TMPDIR"] == str(tool.sandbox.tmp)
    assert env["LC_ALL"] == "C.UTF-8"
    assert env["PATH"] == os.environ["PATH"]
    assert not any(is_secret_name(name) for name in env)


def test_allow_listing_passes_harmless_names_and_never_secret_ones() -> None:
    key = _fake_key()
    source = {
        "EDITOR": "vi",
        "AWS_SECRET_ACCESS_KEY": key,
        "AWS_REGION": "eu-west-1",
        "GOOGLE_APPLICATION_CREDENTIALS": "/c.json",
        "AZURE_CLIENT_ID": "id",
        "GH_ENTERPRISE_HOST": "h",
        "GITHUB_TOKEN": key,
        "CI_JOB_JWT": key,
        "DEEPSEEK_BASE_URL": "http://x",
        "OPENAI_ORG": "o",
        "dsh_lower": key,
        "SSH_AUTH_SOCK": "/s",
        "PATH": "/bin",
    }
    settings = SandboxSettings(tool_env_allow=",".join([*source, " "]))
    env = tool_environment("/h", "/t", settings.extra_env_names, source)
    assert env == {"EDITOR": "vi", "PATH": "/bin", "HOME": "/h", "TMPDIR": "/t", "TMP": "/t",
                   "TEMP": "/t"}  # fmt: skip


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SANDBOX", "strict")
    monkeypatch.setenv("DSH_SANDBOX_NETWORK", "deny")
    settings = SandboxSettings()
    assert (settings.sandbox, settings.sandbox_network) == ("strict", "deny")
    monkeypatch.setenv("DSH_SANDBOX", "maybe")
    with pytest.raises(ValueError, match="sandbox"):
        SandboxSettings()


async def test_private_dirs_are_removed_with_the_sandbox(tmp_path: Path) -> None:
    sandbox = ToolSandbox(SandboxSettings(sandbox="off"))
    base = sandbox.home.parent
    assert base.is_dir()
    del sandbox
    assert not base.exists()


# --- confinement ----------------------------------------------------------------------------


@pytest.mark.usefixtures("mechanisms")
async def test_writes_outside_cwd_and_temp_are_refused(tmp_path: Path) -> None:
    cwd, outside = tmp_path / "cwd", tmp_path / "outside"
    cwd.mkdir()
    outside.mkdir()
    (outside / "kept").write_text("sentinel")
    real_home = Path.home() / f"dsh-sandbox-probe-{uuid.uuid4().hex}"
    tool = _tool()
    try:
        for command in (
            f"cd / && touch x-{uuid.uuid4().hex}",
            f"touch {real_home}",
            f"touch {outside}/new",
            f"echo changed > {outside}/kept",
            f"rm {outside}/kept",
            f"mkdir {outside}/d",
            f"ln -s /etc/passwd {outside}/link",
        ):
            outcome = await _bash(cwd, command, tool)
            assert "\n[exit code: " in outcome.text, command
            assert "ermission denied" in outcome.text or "not permitted" in outcome.text, command
        assert not real_home.exists()
    finally:
        real_home.unlink(missing_ok=True)
    assert sorted(p.name for p in outside.iterdir()) == ["kept"]
    assert (outside / "kept").read_text() == "sentinel"


@pytest.mark.usefixtures("mechanisms")
async def test_writes_in_cwd_temp_and_home_work_and_reads_stay_open(tmp_path: Path) -> None:
    tool = _tool()
    command = (
        'echo a > f && mkdir -p d/e && mv f d/e/g && cat d/e/g && echo b > "$TMPDIR/t" && '
        'cat "$TMPDIR/t" && echo c > ~/h && cat ~/h && echo x > /dev/null && cat <<EOF\nheredoc\n'
        "EOF\nhead -c 0 /etc/passwd && echo read-ok"
    )
    outcome = await _bash(tmp_path, command, tool)
    assert outcome == ToolOutcome("a\nb\nc\nheredoc\nread-ok\n")
    assert (tmp_path / "d/e/g").read_text() == "a\n"


@pytest.mark.usefixtures("mechanisms")
async def test_network_deny_refuses_loopback(tmp_path: Path, listener: int) -> None:
    tool = _tool(network="deny")
    python = f"{sys.executable} -I -c 'import socket; socket.create_connection((\"127.0.0.1\", {listener}), 2)'"  # noqa: E501
    outcome = await _bash(tmp_path, python, tool)
    assert outcome.text.endswith("[exit code: 1]")
    assert "Error" in outcome.text
    if shutil.which("curl"):
        curl = await _bash(tmp_path, f"curl -sS -m 2 http://127.0.0.1:{listener}/", tool)
        assert curl.text.endswith("[exit code: 7]")  # couldn't connect


@pytest.mark.usefixtures("mechanisms")
async def test_network_allow_reaches_loopback(tmp_path: Path, listener: int) -> None:
    # The same probe as above succeeds when the network is allowed: the deny test can fail.
    tool = _tool(network="allow")
    python = f'{sys.executable} -I -c \'import socket; socket.create_connection(("127.0.0.1", {listener}), 2); print("connected")\''  # noqa: E501
    assert await _bash(tmp_path, python, tool) == ToolOutcome("connected\n")


async def test_strict_with_a_missing_mechanism_is_a_clear_error(tmp_path: Path) -> None:
    missing = SandboxMechanisms(landlock_abi=0, netns_problem="user namespaces are disabled")
    tool = _tool("strict", "deny", mechanisms=missing)
    outcome = await _bash(tmp_path, "touch ran", tool)
    assert outcome.is_error
    assert outcome.text == (
        "Error: sandbox unavailable and DSH_SANDBOX=strict: missing Landlock (writes are not "
        "confined); a network namespace (user namespaces are disabled)"
    )
    assert not (tmp_path / "ran").exists()


async def test_warn_with_a_missing_mechanism_says_so_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    missing = SandboxMechanisms(landlock_abi=0, netns_problem="forced")
    tool = _tool("warn", "deny", mechanisms=missing)
    for _ in range(3):
        assert await _bash(tmp_path, "echo ran", tool) == ToolOutcome("ran\n")
    err = capfd.readouterr().err
    assert err.splitlines() == [
        "dsh: sandbox incomplete, running without Landlock (writes are not confined); "
        "a network namespace (forced)"
    ]


async def test_off_runs_unconfined(tmp_path: Path) -> None:
    cwd, outside = tmp_path / "cwd", tmp_path / "outside"
    cwd.mkdir()
    outside.mkdir()
    assert await _bash(cwd, f"touch {outside}/new", _tool("off")) == ToolOutcome("(no output)")
    assert (outside / "new").exists()


# --- the wrapper itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--bogus", "--", "true"], 2, "unknown option '--bogus'"),
        (["--landlock"], 2, "no command after '--'"),
        (["--landlock", "--write", "/nonexistent/x", "--", "true"], 126, "/nonexistent/x"),
        (["--", "/nonexistent/cmd"], 127, "cannot run /nonexistent/cmd"),
    ],
)
def test_the_wrapper_refuses_bad_requests(args: list[str], code: int, message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(_WRAPPER), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == code
    assert message in done.stderr
    assert done.stderr.count("\n") == 1

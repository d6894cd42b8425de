"""The ``bash`` tool's environment and sandbox, against real ``bash`` processes."""

from __future__ import annotations

import os
import secrets
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core import (
    BashTool,
    SandboxMechanisms,
    SandboxSettings,
    ToolOutcome,
    ToolSandbox,
    is_secret_name,
    plugins,
    tool_environment,
)
from dsh_core._sandbox import _provider_names
from dsh_core.testing import tool_context

pytestmark = pytest.mark.anyio


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


# --- environment ----------------------------------------------------------------------------


@pytest.fixture
def zephyr(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An installed model provider ``zephyr``: its settings read ``ZEPHYR_*``, its key sits in
    ``ZEPHYR_CREDS`` (no secret-shaped word: only the provider says it is one)."""
    monkeypatch.setattr(plugins, "model_env_prefixes", lambda: ("ZEPHYR_",))
    monkeypatch.setattr(plugins, "secret_env_names", lambda: ("ZEPHYR_CREDS", "VENDOR_CREDS"))
    _provider_names.cache_clear()
    yield
    _provider_names.cache_clear()


def test_installed_providers_name_their_variables(zephyr: None) -> None:
    # no vendor is named in core: the installed providers' prefixes and secrets are asked for
    assert is_secret_name("ZEPHYR_BASE_URL")
    assert is_secret_name("zephyr_model")
    assert is_secret_name("VENDOR_CREDS")
    assert not is_secret_name("VENDOR_REGION")
    assert not is_secret_name("EDITOR")


async def test_env_holds_no_secret_and_a_private_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zephyr: None
) -> None:
    key = _fake_key()
    names = ("ZEPHYR_CREDS", "VENDOR_CREDS", "OPENAI_API_KEY", "GITHUB_TOKEN", "MY_PASSWORD",
             "DSH_X", "AWS_SECRET_ACCESS_KEY", "AZURE_CLIENT_SECRET")  # fmt: skip
    for name in names:
        monkeypatch.setenv(name, key)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    tool = _tool("off")
    outcome = await _bash(tmp_path, "env; printenv ZEPHYR_CREDS", tool)
    assert key not in outcome.text
    assert outcome.text.endswith("[exit code: 1]")  # printenv of an unset variable exits 1
    env = dict(line.split("=", 1) for line in outcome.text.splitlines() if "=" in line)
    assert env["HOME"] == str(tool.sandbox.home) != str(Path.home())
    assert env["TMPDIR"] == str(tool.sandbox.tmp)
    assert env["LC_ALL"] == "C.UTF-8"
    assert env["PATH"] == os.environ["PATH"]
    assert not any(is_secret_name(name) for name in env)


def test_allow_listing_passes_harmless_names_and_never_secret_ones(zephyr: None) -> None:
    key = _fake_key()
    source = {
        "EDITOR": "vi",
        "AWS_SECRET_ACCESS_KEY": key,
        "AWS_REGION": "eu-west-1",
        "GOOGLE_APPLICATION_CREDENTIALS": "/c.json",
        "GITHUB_TOKEN": key,
        "CI_JOB_JWT": key,
        "ZEPHYR_BASE_URL": "http://x",
        "VENDOR_CREDS": key,
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


# --- when a mechanism is missing -------------------------------------------------------------


async def test_strict_with_a_missing_mechanism_is_a_one_line_error(tmp_path: Path) -> None:
    missing = SandboxMechanisms(bwrap_problem="bubblewrap (forced: no user namespaces)")
    tool = _tool("strict", "deny", mechanisms=missing)
    outcome = await _bash(tmp_path, "touch ran", tool)
    assert outcome.is_error
    assert outcome.text == (
        "Error: sandbox unavailable and DSH_SANDBOX=strict: bubblewrap (forced: no user namespaces)"
    )
    assert not (tmp_path / "ran").exists()


async def test_warn_with_a_missing_mechanism_says_so_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    missing = SandboxMechanisms(bwrap_problem="bubblewrap (forced)", seccomp_problem="seccomp")
    tool = _tool("warn", "deny", mechanisms=missing)
    for _ in range(3):
        assert await _bash(tmp_path, "echo ran", tool) == ToolOutcome("ran\n")
    err = capfd.readouterr().err
    assert err.splitlines() == [
        "dsh: sandbox incomplete, running without bubblewrap (forced); seccomp"
    ]


async def test_off_runs_unconfined(tmp_path: Path) -> None:
    cwd, outside = tmp_path / "cwd", tmp_path / "outside"
    cwd.mkdir()
    outside.mkdir()
    assert await _bash(cwd, f"touch {outside}/new", _tool("off")) == ToolOutcome("(no output)")
    assert (outside / "new").exists()


def test_the_probe_names_bubblewrap_and_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_core import _sandbox  # noqa: PLC0415 - the cached probe itself

    monkeypatch.setenv("PATH", "/nonexistent")
    _sandbox._probe.cache_clear()  # pyright: ignore[reportPrivateUsage]
    _sandbox._bwrap.cache_clear()  # pyright: ignore[reportPrivateUsage]
    try:
        found = SandboxMechanisms.probe()
    finally:
        _sandbox._probe.cache_clear()  # pyright: ignore[reportPrivateUsage]
        _sandbox._bwrap.cache_clear()  # pyright: ignore[reportPrivateUsage]
    assert found.bwrap_problem == (
        "bubblewrap: bwrap is not on PATH; install bubblewrap (Debian/Ubuntu: apt-get install "
        "bubblewrap)"
    )

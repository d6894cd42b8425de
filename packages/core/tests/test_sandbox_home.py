"""Every home is hidden whole; it lends back, read-only, only what the programs on PATH need.

Real bubblewrap, strict. The host's ``/tmp`` (where these fake homes are) is left visible in
these tests, so that only the hiding of the home can make a read fail.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from dsh_core import BashTool, SandboxSettings, ToolSandbox
from dsh_core import _sandbox_fs as sandbox_fs
from dsh_core.testing import tool_context

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("needs_sandbox")]


def _fake_key() -> str:
    return "sk-" + "home" * 8  # built at run time: no key-shaped string in the repository


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``$HOME`` outside every default-hidden folder: start-up files that export a key,
    a credential folder, a tool root on ``PATH`` and a keyring."""
    monkeypatch.setattr(sandbox_fs, "HIDDEN_DIRS", ())
    folder = tmp_path / "home-of-someone"
    folder.mkdir()
    key = _fake_key()
    (folder / ".bashrc").write_text(f"export OPENAI_API_KEY={key}\n")
    (folder / ".profile").write_text(f"export KEY={key}\n")
    (folder / "notes.txt").write_text(f"{key}\n")
    (folder / ".config" / "app").mkdir(parents=True)
    (folder / ".config" / "app" / "token").write_text(f"{key}\n")
    # A tool root (~/.cargo/bin on PATH): its own files are lent, its registry token is not.
    tool = folder / ".cargo"
    (tool / "bin").mkdir(parents=True)
    (tool / "share").mkdir()
    (tool / "share" / "data.txt").write_text("tool data\n")
    (tool / "credentials.toml").write_text(f"token = {key}\n")
    _script(tool / "bin" / "tool-prog", f"cat {tool}/share/data.txt")
    # ~/.local/bin on PATH: a link into an install root under ~/.local/share (lent), the
    # rest of ~/.local (a keyring) not.
    local_bin = folder / ".local" / "bin"
    local_bin.mkdir(parents=True)
    package = folder / ".local" / "share" / "pkg"
    (package / "bin").mkdir(parents=True)
    (package / "lib").mkdir()
    (package / "lib" / "code.txt").write_text("package code\n")
    _script(package / "bin" / "linked-prog", f"cat {package}/lib/code.txt")
    (local_bin / "linked-prog").symlink_to(package / "bin" / "linked-prog")
    (folder / ".local" / "share" / "keyrings").mkdir()
    (folder / ".local" / "share" / "keyrings" / "login.keyring").write_text(f"{key}\n")
    monkeypatch.setenv("HOME", str(folder))
    return folder


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _run(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    sandbox = ToolSandbox(SandboxSettings(sandbox="strict", sandbox_network="deny"))
    confined = sandbox.confine(argv, str(cwd), env=sandbox.environment() | dict(env))
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


def _path(home: Path) -> str:
    return os.pathsep.join([f"{home}/.cargo/bin", f"{home}/.local/bin", "/usr/bin", "/bin"])


async def test_a_key_in_the_home_is_not_readable(home: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    names = [".bashrc", ".profile", "notes.txt", ".config/app/token", ".cargo/credentials.toml"]
    names.append(".local/share/keyrings/login.keyring")
    reads = "; ".join(f"cat {home}/{name}" for name in names)
    sandbox = ToolSandbox(
        SandboxSettings(sandbox="strict", sandbox_network="deny"),
        source_env={"PATH": _path(home)},
    )
    tool = BashTool(sandbox=sandbox)
    arguments = {"command": f"{reads}; ls -A {home}", "description": "t"}
    outcome = await tool.run(arguments, tool_context(run, [tool]))
    assert _fake_key() not in outcome.text
    # Each read fails (a hidden file is absent; a credential file inside a lent folder is
    # covered by an unreadable one).
    for name in names:
        assert f"cat: {home}/{name}: " in outcome.text, outcome.text
    # The home shows only the mount points of what it lends (what PATH needs).
    assert outcome.text.startswith(".cargo\n.local\n[stderr]\n"), outcome.text


def test_a_home_lends_what_the_programs_on_path_need(home: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    done = _run(["sh", "-c", "tool-prog; linked-prog"], run, {"PATH": _path(home)})
    assert done.stdout == "tool data\npackage code\n", done.stderr


def test_a_lent_folder_is_read_only(home: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    target = home / ".cargo" / "share" / "data.txt"
    done = _run(["sh", "-c", f"echo x >> {target}; rm {target}"], run, {"PATH": _path(home)})
    assert done.stderr.count("Read-only file system") == 2, done.stderr
    assert target.read_text() == "tool data\n"


def test_the_users_own_and_other_homes_are_hidden(tmp_path: Path) -> None:
    # The real home (the password database's, whatever $HOME says) and /root, /home: none of
    # their top-level files is visible (this test reads, never writes, the real ones).
    run = tmp_path / "run"
    run.mkdir()
    homes = [pwd.getpwuid(os.getuid()).pw_dir, "/root", "/home"]
    files = sorted(
        str(entry)
        for folder in homes
        if os.access(folder, os.R_OK)
        for entry in Path(folder).iterdir()
        if entry.is_file() and not entry.is_symlink() and os.access(entry, os.R_OK)
    )
    if not files:
        pytest.skip("no readable file at the top of a home here")
    probe = "import os, sys; print([p for p in sys.argv[1:] if os.path.exists(p)])"
    done = _run([sys.executable, "-c", probe, *files], run, {})
    assert done.stdout == "[]\n", done.stderr


def test_what_a_home_lends_is_derived_from_path(home: Path) -> None:
    homes = sandbox_fs.home_folders(str(home))
    lent = sandbox_fs.lent_from_homes(_path(home), homes)
    expected = {f"{home}/.cargo", f"{home}/.local/bin", f"{home}/.local/share/pkg"}
    assert set(lent) == expected
    # A bin folder lends its parent, but never the home itself nor an XDG base folder.
    for folder in (home / "bin", home / ".local" / "share" / "bin"):
        folder.mkdir()
    path = f"{home}/bin:{home}/.local/share/bin"
    assert sandbox_fs.lent_from_homes(path, homes) == (f"{home}/.local/share/bin", f"{home}/bin")
    # A PATH entry that is a home or an XDG base folder itself lends nothing.
    assert sandbox_fs.lent_from_homes(f"{home}:{home}/.local:{home}/.config", homes) == ()

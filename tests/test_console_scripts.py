"""Every console script of the workspace answers --help and --version at once, without reading
stdin (dsh-acp-agent used to wait on it), and its help has no reStructuredText backticks."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def console_scripts() -> list[str]:
    """Every ``[project.scripts]`` entry of every workspace package, read from its pyproject."""
    names: list[str] = []
    for pyproject in sorted((ROOT / "packages").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        names += sorted(project.get("scripts", {}))
    return names


def test_the_scripts_are_discovered() -> None:
    expected = {"dsh-snapshot", "dsh-acp-agent", "dsh-scripted-model-server", "dsh-llm-proxy"}
    assert expected <= set(console_scripts())


@pytest.mark.parametrize("script", console_scripts())
@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_every_console_script_answers_without_stdin(script: str, flag: str) -> None:
    exe = BIN / script
    assert exe.is_file(), f"{script} is not installed next to {sys.executable}"
    # A pipe that is never written nor closed: a script reading stdin hangs until the timeout.
    with subprocess.Popen(
        [str(exe), flag],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"{script} {flag} waited on stdin")
    assert proc.returncode == 0, out + err
    if flag == "--version":
        assert out.startswith(f"{script} "), out
    else:
        assert out.startswith("usage:"), out
        assert "`" not in out, f"reStructuredText backticks in {script} --help"

"""The README's install commands, run verbatim in a fresh venv, work.

Offline: each command gets ``--no-index --find-links $DSH_WHEELHOUSE`` appended (the locked
third-party wheels and hatchling, which ``nox -s "tests(package='workspace')"`` fetches once
with ``tools/check_wheels.py wheelhouse``), and pip reads no machine configuration. The venv's
own pip (the one ``python -m venv`` bundles, as a user has it) runs the command. The git-URL
form is run against this repository's committed ``HEAD`` through a ``file://`` URL.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PUBLIC_REPOSITORY = "https://github.com/dsh-py/dsh-py"


def install_section() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Installing")
    return readme[start : readme.index("\n## ", start + 1)]


def readme_command(prefix: str) -> list[str]:
    """The console command in the Installing section starting with ``$ <prefix>``."""
    for block in re.findall(r"```console\n(.*?)```", install_section(), re.DOTALL):
        joined = block.replace("\\\n", " ")  # shell line continuations
        for line in joined.splitlines():
            if line.startswith(f"$ {prefix}"):
                return shlex.split(line[2:])
    raise AssertionError(f"README.md's Installing section has no `$ {prefix}…` command")


@pytest.fixture
def wheelhouse() -> Path:
    folder = os.environ.get("DSH_WHEELHOUSE")
    if not folder:
        pytest.skip("needs DSH_WHEELHOUSE: run nox -s \"tests(package='workspace')\"")
    return Path(folder)


def fresh_venv(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A stdlib venv with its bundled pip, and an environment that reads no pip config."""
    venv.EnvBuilder(with_pip=True).create(tmp_path / "venv")
    bin_dir = tmp_path / "venv" / "bin"
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    return bin_dir, env


def run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"$ {shlex.join(args)}\n{done.stdout}{done.stderr}"
    return done.stdout


IMPORT_AND_CHECK = """
import importlib.metadata as md, dsh_core, dsh_llm_replay
assert "site-packages" in dsh_llm_replay.__file__, dsh_llm_replay.__file__
assert md.requires("dsh-llm-replay")[0] == "dsh-core==" + md.version("dsh-core")
print(md.version("dsh-llm-replay"))
"""


def test_install_from_a_checkout_as_the_readme_says(tmp_path: Path, wheelhouse: Path) -> None:
    command = readme_command("pip install ./packages/")
    assert command[:2] == ["pip", "install"]
    bin_dir, env = fresh_venv(tmp_path)
    offline = ["--no-index", "--find-links", str(wheelhouse)]
    run([str(bin_dir / "pip"), *command[1:], *offline], ROOT, env)
    version = run([str(bin_dir / "python"), "-c", IMPORT_AND_CHECK], tmp_path, env)
    project = tomllib.loads((ROOT / "packages/llm-replay/pyproject.toml").read_text())
    assert version.strip() == project["project"]["version"]


def test_a_package_alone_from_a_checkout_does_not_install(tmp_path: Path, wheelhouse: Path) -> None:
    # Why the README names the siblings: dsh-core is on no index pip may use.
    bin_dir, env = fresh_venv(tmp_path)
    offline = ["--no-index", "--find-links", str(wheelhouse)]
    done = subprocess.run(
        [str(bin_dir / "pip"), "install", "./packages/llm-replay", *offline],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "dsh-core" in done.stdout + done.stderr


def test_install_from_a_git_url_as_the_readme_says(tmp_path: Path, wheelhouse: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    command = readme_command('pip install "dsh-core @ git+')
    local = f"file://localhost{ROOT}"  # PEP 508 wants a host in a git+file URL
    requirements = [arg.replace(PUBLIC_REPOSITORY, local) for arg in command[2:]]
    assert all(local in requirement for requirement in requirements)
    bin_dir, env = fresh_venv(tmp_path)
    offline = ["--no-index", "--find-links", str(wheelhouse)]
    run([str(bin_dir / "pip"), "install", *requirements, *offline], tmp_path, env)
    run([str(bin_dir / "python"), "-c", IMPORT_AND_CHECK], tmp_path, env)

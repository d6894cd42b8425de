"""Shared fixtures for the dsh-snapshot tests: copies of committed scenarios in tmp_path."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_snapshot.testing import copy_scenario

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOTS = ROOT / "snapshots" / "sdk"


@pytest.fixture
def scenario_copy(tmp_path: Path) -> Callable[[str], Path]:
    """Copy ``snapshots/sdk/<name>`` into ``tmp_path/sdk/<name>``; skip if it is not committed."""

    def copy(name: str) -> Path:
        source = SNAPSHOTS / name
        if not (source / "input.json").is_file():
            pytest.skip(f"scenario {name} is not committed under {SNAPSHOTS}")
        return copy_scenario(source, tmp_path)

    return copy


@pytest.fixture
def committed() -> Path:
    """``snapshots/sdk`` of the repository (read only); skip when it is not there."""
    if not SNAPSHOTS.is_dir():
        pytest.skip(f"no committed scenarios under {SNAPSHOTS}")
    return SNAPSHOTS


@pytest.fixture
def inner_pytest() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run a fresh pytest in a tree (``inner_pytest(tree, *args, env=None)``) with its own
    ``pytest.ini`` and rootdir, so this checkout's configuration stays out of it."""

    def run(
        tree: Path, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        (tree / "pytest.ini").write_text("[pytest]\n")
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-c",
                str(tree / "pytest.ini"),
                "--rootdir",
                str(tree),
                *args,
            ],
            cwd=tree,
            capture_output=True,
            text=True,
            check=False,
            env=env,
            timeout=600,
        )

    return run

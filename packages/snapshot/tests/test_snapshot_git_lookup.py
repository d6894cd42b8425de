"""The gate asks git whether a scenario's ``.env`` or ``.pending/`` is tracked; the ``git`` it
starts must never be one the pull request committed (red team F1, p24): with a relative PATH
entry (``node_modules/.bin``) and the scenario folder as the current directory it was."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dsh_snapshot import load_scenario
from dsh_snapshot._dotenv import git_tracks
from dsh_snapshot._pending import pending_tracked


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A git checkout whose scenario folder holds ``node_modules/.bin/git``, a relative PATH."""
    folder = tmp_path / "repo" / "sdk" / "x"
    folder.mkdir(parents=True)
    (folder / "input.json").write_text('{"steps": [{"op": "initialize"}]}')
    (folder / ".env").write_text("X=1\n")
    (folder / "snapshot.yml").write_text(
        "version: 1\nprofile: sdk\nstore: default\nrecording: scripted\n"
    )
    marker = tmp_path / "planted-git-ran"
    fake = folder / "node_modules" / ".bin" / "git"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
    fake.chmod(0o755)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path / "repo", check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path / "repo", check=True)
    monkeypatch.setenv("PATH", os.pathsep.join(["node_modules/.bin", "", os.environ["PATH"]]))
    monkeypatch.chdir(folder)  # "." and relative entries resolve in the scenario folder
    return folder, marker


def test_git_tracks_asks_the_hosts_git(planted: tuple[Path, Path]) -> None:
    folder, marker = planted
    assert git_tracks(folder / ".env")  # the real git answers: tracked
    assert not git_tracks(folder / "input.json.missing")
    assert not marker.exists()


def test_pending_tracked_asks_the_hosts_git(planted: tuple[Path, Path]) -> None:
    folder, marker = planted
    assert not pending_tracked(load_scenario(folder))
    assert not marker.exists()

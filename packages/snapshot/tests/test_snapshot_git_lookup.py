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


_SNAPSHOT_YML = "version: 1\nprofile: sdk\nstore: default\nrecording: scripted\n"


def _plant_bare_repository(folder: Path, marker: Path) -> None:
    """Ordinary committable files that git's discovery takes for a bare repository."""
    (folder / "HEAD").write_text("ref: refs/heads/main\n")
    for name in ("objects", "refs"):
        (folder / name).mkdir()
        (folder / name / ".keep").write_text("")
    (folder / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n"
        f'\tfsmonitor = "touch {marker}; false"\n'
    )


def test_a_bare_repository_in_the_scenario_is_not_gits_configuration(tmp_path: Path) -> None:
    """Red team 4 F1: the scenario's ``config`` was git's; its ``core.fsmonitor`` ran on host."""
    repo = tmp_path / "repo"
    folder = repo / "sdk" / "x"
    folder.mkdir(parents=True)
    (folder / "input.json").write_text('{"steps": [{"op": "initialize"}]}')
    (folder / "snapshot.yml").write_text(_SNAPSHOT_YML)
    (folder / ".pending").mkdir()
    (folder / ".pending" / "x").write_text("")
    marker = tmp_path / "fsmonitor-ran"
    _plant_bare_repository(folder, marker)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)

    assert pending_tracked(load_scenario(folder))  # the checkout's own index answers
    assert git_tracks(folder / "config")
    assert not marker.exists()


def test_outside_any_work_tree_git_is_not_asked(tmp_path: Path) -> None:
    """No ``.git`` above the scenario: nothing is tracked, and git never discovers the plant."""
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "input.json").write_text('{"steps": [{"op": "initialize"}]}')
    (folder / "snapshot.yml").write_text(_SNAPSHOT_YML)
    marker = tmp_path / "fsmonitor-ran"
    _plant_bare_repository(folder, marker)
    (folder / ".pending").mkdir()

    assert not pending_tracked(load_scenario(folder))
    assert not git_tracks(folder / "config")
    assert not marker.exists()


def test_a_linked_worktree_is_answered_through_its_git_file(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=main, check=True)
    (main / "tracked.env").write_text("X=1\n")
    subprocess.run(["git", "add", "-A"], cwd=main, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
        cwd=main,
        check=True,
    )
    linked = tmp_path / "linked"
    subprocess.run(["git", "worktree", "add", "-q", str(linked)], cwd=main, check=True)
    assert (linked / ".git").is_file()
    assert git_tracks(linked / "tracked.env")
    assert not git_tracks(linked / "other.env")


def test_a_failing_git_in_a_work_tree_counts_as_tracked(tmp_path: Path) -> None:
    """Fail closed (red team 4 F13): an error must not make a committed ``.pending/`` look
    like outputs this machine wrote (and may clear, review or accept)."""
    repo = tmp_path / "repo"
    folder = repo / "sdk" / "x"
    folder.mkdir(parents=True)
    (folder / "input.json").write_text('{"steps": [{"op": "initialize"}]}')
    (folder / "snapshot.yml").write_text(_SNAPSHOT_YML)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    assert not pending_tracked(load_scenario(folder))
    (repo / ".git" / "index").write_bytes(b"DIRC not an index")
    assert pending_tracked(load_scenario(folder))


@pytest.mark.parametrize("store", ["../victim", "..", "a/../../victim", "."])
def test_clearing_pending_outputs_never_leaves_pending(tmp_path: Path, store: str) -> None:
    """The store name is removed at ``.pending/``'s descriptor: a path there must not walk out."""
    from dsh_snapshot._pending import clear_pending  # noqa: PLC0415 - one test's subject

    folder = tmp_path / "x"
    (folder / ".pending" / "jsonl").mkdir(parents=True)
    (folder / "input.json").write_text('{"steps": [{"op": "initialize"}]}')
    (folder / "snapshot.yml").write_text(_SNAPSHOT_YML)
    (folder / "victim").mkdir()
    (folder / "victim" / "precious").write_text("kept")
    clear_pending(load_scenario(folder), store)
    assert (folder / "victim" / "precious").read_text() == "kept"
    assert (folder / ".pending" / "jsonl").is_dir()

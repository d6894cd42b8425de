"""Confinement units: the workspace copy never follows a link out; paths stay in the run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dsh_snapshot import ConfinementError, copy_workspace, load_scenario
from dsh_snapshot._confine import check_scenario_links, check_step_paths


def test_links_inside_the_workspace_are_copied_as_relative_links(tmp_path: Path) -> None:
    source = tmp_path / "workspace"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "a.txt").write_text("a")
    (source / "rel").symlink_to("sub/a.txt")
    (source / "abs").symlink_to(source / "sub")  # absolute, but inside: rewritten relative
    (source / "sub" / "up").symlink_to("..")
    target = tmp_path / "copy"
    assert copy_workspace(source, target) == 5
    assert os.readlink(target / "rel") == "sub/a.txt"
    assert os.readlink(target / "abs") == "sub"
    assert os.readlink(target / "sub" / "up") == ".."
    assert (target / "abs" / "a.txt").read_text() == "a"
    assert (target / "rel").resolve() == (target / "sub" / "a.txt").resolve()


@pytest.mark.parametrize("link", ["../outside.txt", "/", "missing"])
def test_a_link_leading_out_or_nowhere_is_refused_and_the_copy_removed(
    tmp_path: Path, link: str
) -> None:
    (tmp_path / "outside.txt").write_text("x")
    source = tmp_path / "workspace"
    (source / "deep").mkdir(parents=True)
    (source / "deep" / "bad").symlink_to(link)
    target = tmp_path / "copy"
    with pytest.raises(ConfinementError, match="workspace entry 'deep/bad'") as info:
        copy_workspace(source, target)
    assert info.value.path == source / "deep" / "bad"
    assert not target.exists()


def test_a_special_file_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "workspace"
    source.mkdir()
    os.mkfifo(source / "pipe")
    with pytest.raises(ConfinementError, match="'pipe' is not a file, directory or symlink"):
        copy_workspace(source, tmp_path / "copy")


def test_a_workspace_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "workspace").symlink_to(tmp_path / "real")
    with pytest.raises(ConfinementError, match="itself a symlink"):
        copy_workspace(tmp_path / "workspace", tmp_path / "copy")


def _scenario(folder: Path, steps: list[dict[str, object]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(json.dumps({"steps": steps}))
    (folder / "stdout.golden.jsonl").write_text("")  # upstream's: path fields such as cwd
    return folder


def test_a_top_level_link_out_of_the_scenario_is_refused(tmp_path: Path) -> None:
    folder = _scenario(tmp_path / "s", [{"op": "initialize"}])
    (tmp_path / "elsewhere.jsonl").write_text("{}\n")
    (folder / "session.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(ConfinementError, match=r"scenario entry 'session\.jsonl'"):
        check_scenario_links(load_scenario(folder))


def test_step_paths_are_resolved_in_the_run_cwd_links_included(tmp_path: Path) -> None:
    folder = _scenario(tmp_path / "s", [{"op": "newSession", "cwd": "out/x"}])
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "out").symlink_to(tmp_path)
    with pytest.raises(ConfinementError, match=r"field 'steps\.0\.cwd'"):
        check_step_paths(load_scenario(folder), cwd)
    (cwd / "out").unlink()
    (cwd / "out").mkdir()
    check_step_paths(load_scenario(folder), cwd)


def test_an_override_ready_file_is_checked_in_the_run_cwd(tmp_path: Path) -> None:
    folder = _scenario(tmp_path / "s", [{"op": "initialize"}])
    (folder / "replay.override.json").write_text('[{"kind": "hang", "readyFile": "d/.ready"}]')
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "d").symlink_to(tmp_path)
    with pytest.raises(ConfinementError, match=r"field '\[0\]\.readyFile'"):
        check_step_paths(load_scenario(folder), cwd)
    (folder / "replay.override.json").write_text('[{"kind": "hang", "readyFile": "/x"}]')
    with pytest.raises(ConfinementError, match=r"replay\.override\.json: field '\[0\]\.readyFile'"):
        check_step_paths(load_scenario(folder), cwd)


def test_checkout_roots_are_the_folders_holding_git(tmp_path: Path) -> None:
    from dsh_snapshot._confine import checkout_roots  # noqa: PLC0415 - one helper

    repo, worktree, loose = tmp_path / "repo", tmp_path / "worktree", tmp_path / "loose"
    (repo / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (repo / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (repo / "snapshots" / "sdk" / "a").mkdir(parents=True)
    worktree.mkdir()
    # A linked worktree's .git is a file; its main tree (the shared .git, the README's .env)
    # is hidden with it.
    (worktree / ".git").write_text(f"gitdir: {repo / '.git' / 'worktrees' / 'wt'}\n")
    (loose / "x").mkdir(parents=True)
    paths = [repo / "snapshots" / "sdk" / "a", worktree, loose / "x"]
    assert checkout_roots(paths) == [str(repo.resolve()), str(worktree.resolve())]


def test_the_gate_s_cwd_is_hidden_or_its_env_files_when_too_wide(tmp_path: Path) -> None:
    from dsh_snapshot._confine import hidden_from_commands  # noqa: PLC0415 - one helper

    here = tmp_path / "not-a-checkout"
    here.mkdir()
    scenario = tmp_path / "elsewhere"
    assert hidden_from_commands(scenario, here) == [str(here.resolve())]
    root = hidden_from_commands(scenario, Path("/"))
    assert "/" not in root  # too wide to hide: only its .env files would be


def _scenario_with(tmp_path: Path, name: str) -> Path:
    """A minimal scenario whose fixture ``name`` is a link to a file outside it."""
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"secret": "outside the scenario"}\n')
    folder = tmp_path / "sdk" / "x"
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(json.dumps({"steps": [{"op": "initialize"}]}))
    (folder / "snapshot.yml").write_text("version: 1\nprofile: sdk\nrecording: scripted\n")
    (folder / "session.jsonl").write_text('{"type":"session","version":0,"id":"s","createdAt":0}\n')
    (folder / name).unlink(missing_ok=True)
    (folder / name).symlink_to(outside)
    return folder


@pytest.mark.parametrize("name", ["stdout.expected.jsonl", "session.jsonl"])
def test_the_expected_fixtures_are_read_through_the_confined_open(
    tmp_path: Path, name: str
) -> None:
    from dsh_snapshot._fsafe import ConfinedPathError  # noqa: PLC0415
    from dsh_snapshot._harvest import expected_fixtures  # noqa: PLC0415

    scenario = load_scenario(_scenario_with(tmp_path, name))
    with pytest.raises(ConfinedPathError, match=f"{name}: a symlink"):
        expected_fixtures(scenario)


def test_the_key_scan_reads_through_the_confined_open(tmp_path: Path) -> None:
    from dsh_snapshot._keyscan import scan_file  # noqa: PLC0415

    # What the walk saw as a folder is a link by the time the file is opened: never followed.
    root = tmp_path / "scenario"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "key.txt").write_text("a file outside\n")
    (root / "sub").symlink_to(elsewhere)
    findings = scan_file(root / "sub" / "key.txt", "sub/key.txt", base=root)
    assert [f.kind for f in findings] == [
        f"cannot be read for the key scan ({root / 'sub'}: a symlink (or not a "
        "directory) on the way: it is never followed)"
    ]

"""``readyFile`` markers stay inside the run directory and never empty an existing file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_llm_replay import ReplayError
from dsh_llm_replay._ready import touch_marker


def test_marker_is_created_empty_under_the_root(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    touch_marker("sub/.ready", tmp_path)
    assert (tmp_path / "sub" / ".ready").read_bytes() == b""


def test_an_existing_file_keeps_its_bytes(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    touch_marker("notes.txt", tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("name", ["/etc/passwd", "../outside", "a/../../outside", "~/x"])
def test_paths_leaving_the_root_are_refused(tmp_path: Path, name: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(ReplayError, match="readyFile"):
        touch_marker(name, run)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_directory_link_leading_outside_is_refused(tmp_path: Path) -> None:
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    (run / "d").symlink_to(outside)
    with pytest.raises(ReplayError, match="outside the run directory"):
        touch_marker("d/marker", run)
    assert list(outside.iterdir()) == []


def test_a_symlink_in_the_markers_place_is_not_followed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (run / ".ready").symlink_to(victim)
    with pytest.raises(ReplayError, match="cannot create readyFile"):
        touch_marker(".ready", run)
    assert victim.read_text() == "precious"
    assert os.path.islink(run / ".ready")

"""``readyFile`` markers stay inside the run directory and never empty an existing file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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
    with pytest.raises(ReplayError, match=r"a link .* is never followed"):
        touch_marker("d/marker", run)
    assert list(outside.iterdir()) == []


def _swap_for_a_link(folder: Path, outside: Path) -> None:
    folder.rename(folder.with_name(folder.name + ".moved"))
    folder.symlink_to(outside, target_is_directory=True)


@pytest.fixture
def run_and_outside(tmp_path: Path) -> tuple[Path, Path]:
    run, outside = tmp_path / "run", tmp_path / "outside"
    (run / "d").mkdir(parents=True)
    outside.mkdir()
    return run, outside


def test_a_directory_swapped_for_a_link_while_the_marker_is_made_is_not_followed(
    run_and_outside: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race a command of the same run can win: the marker's directory is a real one when
    # the path is looked at and a link outside when it is opened. The swap here happens at
    # the marker's first system call, so no check made before it can help.
    run, outside = run_and_outside
    real_open = os.open
    swapped: list[bool] = []

    def open_after_the_swap(*args: Any, **kwargs: Any) -> int:
        if not swapped:
            swapped.append(True)
            _swap_for_a_link(run / "d", outside)
        return real_open(*args, **kwargs)

    monkeypatch.setattr(os, "open", open_after_the_swap)
    with pytest.raises(ReplayError, match="never followed"):
        touch_marker("d/marker", run)
    monkeypatch.undo()
    assert swapped
    assert list(outside.iterdir()) == []


def test_a_directory_swapped_after_it_was_opened_gets_the_marker_inside(
    run_and_outside: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    run, outside = run_and_outside
    real_open = os.open
    calls: list[str] = []

    def swap_before_the_marker(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        calls.append(str(path))
        if str(path) == "marker":  # "d" is open by now: swap it under the walk
            _swap_for_a_link(run / "d", outside)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap_before_the_marker)
    touch_marker("d/marker", run)
    monkeypatch.undo()
    assert calls[-1] == "marker"
    assert list(outside.iterdir()) == []
    assert (run / "d.moved" / "marker").read_bytes() == b""  # the directory it walked into


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

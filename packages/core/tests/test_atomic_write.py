"""``atomic_write``: the one temp-file-fsync-rename helper every package uses."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dsh_core import atomic_write


def test_writes_text_and_bytes_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    atomic_write(target, "one\n")
    assert target.read_bytes() == b"one\n"
    atomic_write(target, b"\x00two")
    assert target.read_bytes() == b"\x00two"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "link"
    link.symlink_to(victim)
    atomic_write(link, "new")
    assert victim.read_text() == "precious"
    assert not link.is_symlink()
    assert link.read_text() == "new"


def test_a_failed_write_leaves_the_old_bytes_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "dir-in-the-way"
    target.mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write(target, "x")
    assert target.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == ["dir-in-the-way"]


def test_the_mode_is_the_callers_less_the_umask(tmp_path: Path) -> None:
    private, shared = tmp_path / "private", tmp_path / "shared"
    old = os.umask(0o022)
    try:
        atomic_write(private, "x")
        atomic_write(shared, "x", mode=0o666)
    finally:
        os.umask(old)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644

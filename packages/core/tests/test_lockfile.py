"""``WriterLock``: one holder at a time, and no lock file left once released."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from dsh_core import SessionBusyError, StoreAccessError, WriterLock


def test_one_holder_and_the_file_goes_with_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    first = WriterLock.try_acquire(path)
    assert first is not None
    assert first.held
    assert WriterLock.try_acquire(path) is None  # another open file description: excluded
    first.release()
    first.release()  # idempotent
    assert not first.held
    assert not path.exists()
    second = WriterLock.try_acquire(path)
    assert second is not None
    second.release()


def test_a_lock_on_a_file_removed_meanwhile_does_not_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A holder releases (removing the file) and a newcomer recreates it between this
    # attempt's open and its flock: the flock lands on the removed inode and must be retried.
    path = tmp_path / "x.lock"
    real_flock = fcntl.flock
    calls: list[int] = []

    def racing_flock(fd: int, operation: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            path.unlink()
            path.write_text("")
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", racing_flock)
    lock = WriterLock.try_acquire(path)
    assert lock is not None
    assert len(calls) == 2
    assert lock._fd is not None
    assert os.fstat(lock._fd).st_ino == path.stat().st_ino
    lock.release()


def test_a_directory_in_the_way_is_an_os_error(tmp_path: Path) -> None:
    (tmp_path / "x.lock").mkdir()
    with pytest.raises(IsADirectoryError):
        WriterLock.try_acquire(tmp_path / "x.lock")


def test_acquire_words_a_held_lock_and_an_unopenable_one_as_store_errors(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.lock"
    held = WriterLock.acquire(path, "s", tmp_path / "s.jsonl")
    try:
        with pytest.raises(SessionBusyError) as busy:
            WriterLock.acquire(path, "s", tmp_path / "s.jsonl")
        assert str(busy.value) == (
            f"session s ({tmp_path / 's.jsonl'}) is already open for writing by another writer "
            f"(lock {path} is held); close that session first"
        )
    finally:
        held.release()
    blocked = tmp_path / "dir.lock"
    blocked.mkdir()  # a directory where the lock file belongs
    with pytest.raises(StoreAccessError, match=r"dir\.lock: cannot open the writer lock: "):
        WriterLock.acquire(blocked, "s", tmp_path)

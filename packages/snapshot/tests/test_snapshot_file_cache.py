"""What is read from a scenario's fixtures is read once per scenario, and again only when a
fixture file changes."""

from __future__ import annotations

import os
from pathlib import Path

from dsh_snapshot._harvest import FileCache


def test_a_value_is_computed_once_until_a_file_changes(tmp_path: Path) -> None:
    fixture = tmp_path / "session.jsonl"
    fixture.write_text("one\n", encoding="utf-8")
    cache: FileCache[str] = FileCache()
    reads: list[str] = []

    def read() -> str:
        reads.append(fixture.read_text(encoding="utf-8"))
        return reads[-1]

    assert cache.get([fixture], read) == "one\n"
    assert cache.get([fixture], read) == "one\n"
    assert len(reads) == 1
    fixture.write_text("two, longer\n", encoding="utf-8")
    stat = fixture.stat()
    os.utime(fixture, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert cache.get([fixture], read) == "two, longer\n"
    assert len(reads) == 2


def test_the_least_recently_used_value_is_dropped(tmp_path: Path) -> None:
    files = [tmp_path / f"s{i}.jsonl" for i in range(3)]
    for path in files:
        path.write_text(path.name, encoding="utf-8")
    cache: FileCache[str] = FileCache(size=2)
    computed: list[str] = []

    def compute(path: Path) -> str:
        computed.append(path.name)
        return path.name

    for path in files:
        cache.get([path], lambda path=path: compute(path))
    cache.get([files[2]], lambda: compute(files[2]))  # kept: the most recent
    cache.get([files[0]], lambda: compute(files[0]))  # dropped: computed again
    assert computed == ["s0.jsonl", "s1.jsonl", "s2.jsonl", "s0.jsonl"]

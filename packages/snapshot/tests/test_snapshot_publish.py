"""publish_fixtures: staged, scanned, published only when clean; stale files go only then."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from dsh_snapshot import DirtyRecordingError, publish_fixtures
from dsh_snapshot._keyscan import digest
from dsh_snapshot._scenario import AllowEntry


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "scenario"
    folder.mkdir()
    for name in ("session.jsonl", "session.1.jsonl", "session.2.jsonl"):
        (folder / name).write_text(f"old {name}\n")
    return folder


def _state(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_clean_set_is_published_and_stale_children_removed(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    written = publish_fixtures(
        folder, {"session.jsonl": "new\n", "session.1.jsonl": "old session.1.jsonl\n"}
    )
    assert written == ["-session.2.jsonl", "session.jsonl"]
    assert _state(folder) == {
        "session.1.jsonl": b"old session.1.jsonl\n",
        "session.jsonl": b"new\n",
    }


def test_a_dirty_set_changes_nothing_and_never_prints_the_key(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    before = _state(folder)
    key = "sk-" + secrets.token_hex(16)
    with pytest.raises(DirtyRecordingError) as info:
        publish_fixtures(folder, {"session.jsonl": f'{{"text":"{key}"}}\n'})
    assert _state(folder) == before  # nothing replaced, the stale children kept
    message = str(info.value)
    assert key not in message
    assert key[3:] not in message
    assert f"{folder / 'session.jsonl'}:1: looks like" in message
    assert "NOT written" in message
    assert [f.hash for f in info.value.findings] == [digest(key)]


def test_the_live_key_literal_is_refused_even_without_a_pattern(tmp_path: Path) -> None:
    folder = tmp_path / "scenario"
    folder.mkdir()
    with pytest.raises(DirtyRecordingError, match="the value of the live API key"):
        publish_fixtures(
            folder, {"stdout.expected.jsonl": "x plainvalue99 y\n"}, literals=["plainvalue99"]
        )
    assert list(folder.iterdir()) == []


def test_an_allow_listed_value_is_published(tmp_path: Path) -> None:
    folder = tmp_path / "scenario"
    folder.mkdir()
    value = "sk-" + "example" * 3 + "0"
    entry = AllowEntry(file="notes.txt", line=2, hash=digest(value), reason="documentation example")
    text = f"intro\n{value}\n"
    assert publish_fixtures(folder, {"notes.txt": text}, allowlist=[entry]) == ["notes.txt"]
    # Pinned to the file and the value's hash, not the line: a line added above keeps it.
    moved = {"notes.txt": f"a new first line\n{text}"}
    assert publish_fixtures(folder, moved, allowlist=[entry]) == ["notes.txt"]
    with pytest.raises(DirtyRecordingError):  # the same value in another file is not allowed
        publish_fixtures(folder, {"other.txt": f"{value}\n"}, allowlist=[entry])
    other = "sk-" + "example" * 3 + "1"
    with pytest.raises(DirtyRecordingError):  # nor another value in the same file
        publish_fixtures(folder, {"notes.txt": f"{text}{other}\n"}, allowlist=[entry])


@pytest.mark.parametrize("name", ["../x", "/tmp/x", "sub/x"])
def test_names_must_be_plain_file_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="plain file name"):
        publish_fixtures(tmp_path, {name: "x"})

"""``ScenarioFiles``: the one place a scenario folder's file names are spelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core import ScenarioFiles


@pytest.mark.parametrize(
    ("index", "name"), [(0, "session.jsonl"), (1, "session.1.jsonl"), (12, "session.12.jsonl")]
)
def test_session_names_round_trip(index: int, name: str) -> None:
    assert ScenarioFiles.session_name(index) == name
    assert ScenarioFiles.session_index(name) == index


@pytest.mark.parametrize(
    "name", ["input.json", "session.x.jsonl", "session.jsonl.bak", "s.1.jsonl"]
)
def test_other_names_are_no_session(name: str) -> None:
    assert ScenarioFiles.session_index(name) is None


def test_a_negative_index_is_refused() -> None:
    with pytest.raises(ValueError, match="not -1"):
        ScenarioFiles.session_name(-1)


def test_the_paths_of_a_folder(tmp_path: Path) -> None:
    files = ScenarioFiles(tmp_path)
    assert files.input == tmp_path / "input.json"
    assert files.meta == tmp_path / "snapshot.yml"
    assert files.script == tmp_path / "model.script.json"
    assert files.override == tmp_path / "replay.override.json"
    assert files.pending == tmp_path / ".pending"
    assert files.session(2) == tmp_path / "session.2.jsonl"
    # no stdout yet: where ours goes; upstream's June name when only it exists; ours first
    assert files.stdout() == tmp_path / "stdout.expected.jsonl"
    (tmp_path / "stdout.golden.jsonl").write_text("")
    assert files.stdout() == tmp_path / "stdout.golden.jsonl"
    (tmp_path / "stdout.expected.jsonl").write_text("")
    assert files.stdout() == tmp_path / "stdout.expected.jsonl"


def test_child_numbers_keep_what_the_loader_must_refuse(tmp_path: Path) -> None:
    for name in ("session.jsonl", "session.2.jsonl", "session.0.jsonl", "session.10.jsonl", "x"):
        (tmp_path / name).write_text("")
    # session.0.jsonl is a child number 0: the scenario loader refuses it (1..N, no gaps)
    assert ScenarioFiles(tmp_path).child_numbers() == [0, 2, 10]

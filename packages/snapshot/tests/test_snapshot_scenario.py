"""Discovery and validation of scenario folders; errors name the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_core.testing import corpus_unavailable, upstream_corpus
from dsh_snapshot import ScenarioError, detect_loop_profile, discover, load_scenario
from dsh_snapshot._provenance import with_provenance

META = "version: 1\nprofile: sdk\nstore: default\nrecording: scripted\n"
HEADER = '{"type":"session","version":0,"id":"{{sessionId}}","createdAt":0}\n'
CORPUS = upstream_corpus(__file__) or Path("shared/upstream-corpus (not found)")


def _scenario(folder: Path, meta: str | None = META, steps: object = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(
        json.dumps(steps if steps is not None else {"steps": [{"op": "initialize"}]})
    )
    if meta is not None:
        (folder / "snapshot.yml").write_text(meta)
    return folder


def test_discovers_nested_folders_sorted_and_not_inside_workspaces(tmp_path: Path) -> None:
    _scenario(tmp_path / "sdk" / "b")
    a = _scenario(tmp_path / "sdk" / "a")
    _scenario(a / "workspace" / "inner")
    found = discover([tmp_path, tmp_path / "sdk" / "a"])
    assert [s.name for s in found] == ["sdk/a", "sdk/b"]


def test_session_files_in_order(tmp_path: Path) -> None:
    folder = _scenario(tmp_path / "sdk" / "x")
    for name in ("session.jsonl", "session.2.jsonl", "session.1.jsonl"):
        (folder / name).write_text(HEADER)
    scenario = load_scenario(folder)
    assert [p.name for p in scenario.session_files] == [
        "session.jsonl",
        "session.1.jsonl",
        "session.2.jsonl",
    ]
    assert scenario.stdout_file.name == "stdout.expected.jsonl"


def test_gap_in_child_numbers_is_an_error(tmp_path: Path) -> None:
    folder = _scenario(tmp_path / "sdk" / "x")
    (folder / "session.jsonl").write_text(HEADER)
    (folder / "session.2.jsonl").write_text(HEADER)
    with pytest.raises(ScenarioError, match=r"numbered 1\.\.N without gaps, found \[2\]"):
        load_scenario(folder)


@pytest.mark.parametrize(
    ("meta", "field"),
    [
        ("version: 2\nprofile: sdk\nrecording: live\n", "version"),
        ("version: 1\nprofile: sdk\nrecording: guessed\n", "recording"),
        ("version: 1\nprofile: sdk\n", "recording"),
        ("version: 1\nprofile: sdk\nrecording: live\ncolour: red\n", "colour"),
        ("version: 1\nprofile: sdk\nrecording: live\nloop: july\n", "loop"),
    ],
)
def test_bad_snapshot_yml_names_file_and_field(tmp_path: Path, meta: str, field: str) -> None:
    folder = _scenario(tmp_path / "sdk" / "x", meta=meta)
    with pytest.raises(ScenarioError) as info:
        load_scenario(folder)
    assert info.value.field == field
    assert str(info.value).startswith(f"{folder / 'snapshot.yml'}: field {field!r}:")


def test_bad_yaml_and_bad_json(tmp_path: Path) -> None:
    folder = _scenario(tmp_path / "sdk" / "x", meta="version: [1\n")
    with pytest.raises(ScenarioError, match="invalid YAML"):
        load_scenario(folder)
    other = _scenario(tmp_path / "sdk" / "y")
    (other / "input.json").write_text("{nope")
    with pytest.raises(ScenarioError, match=r"input\.json: invalid JSON"):
        load_scenario(other)


@pytest.mark.parametrize(
    ("steps", "field"),
    [
        ({"steps": [{"op": ""}]}, "steps.0.op"),
        ({"steps": [{"op": 7}]}, "steps.0.op"),
        (
            {"steps": [{"op": "newSessionExpectError", "additionalDirectories": "x"}]},
            "steps.0.additionalDirectories",
        ),
        ({"steps": []}, "steps"),
        ({"steps": [{"op": "initialize"}, {"op": "prompt"}]}, "steps.1.text"),
    ],
)
def test_bad_steps_name_the_field(tmp_path: Path, steps: object, field: str) -> None:
    folder = _scenario(tmp_path / "sdk" / "x", steps=steps)
    with pytest.raises(ScenarioError) as info:
        load_scenario(folder)
    assert info.value.field == field
    assert info.value.path == folder / "input.json"


def test_missing_path_and_non_scenario(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no such scenario folder"):
        discover([tmp_path / "nope"])
    with pytest.raises(ScenarioError, match=r"input\.json missing"):
        load_scenario(tmp_path)


def test_upstream_folder_is_read_as_it_is() -> None:
    folder = CORPUS / "june" / "subagent-multi"
    if not folder.is_dir():
        corpus_unavailable(f"upstream corpus not found at {CORPUS} (set DSH_UPSTREAM_CORPUS)")
    scenario = load_scenario(folder)
    assert scenario.meta is None
    assert scenario.name == "june/subagent-multi"
    assert scenario.stdout_file.name == "stdout.golden.jsonl"
    assert len(scenario.child_files) == 2
    fork = load_scenario(CORPUS / "june" / "subagent-fork")
    assert [p.name for p in fork.fork_children] == ["session.1.jsonl"]
    assert load_scenario(CORPUS / "june" / "cancel").authored


def test_snapshot_yml_can_pin_one_backend(tmp_path: Path) -> None:
    pinned = _scenario(tmp_path / "sdk" / "p", meta=META.replace("default", "sqlite"))
    free = _scenario(tmp_path / "sdk" / "f")
    assert load_scenario(pinned).stores(["jsonl", "sqlite"]) == ["sqlite"]
    assert load_scenario(free).stores(["jsonl", "sqlite"]) == ["jsonl", "sqlite"]


@pytest.mark.parametrize("key", ["persistence", "composition"])
def test_snapshot_yml_still_reads_the_key_by_its_old_names(tmp_path: Path, key: str) -> None:
    old = META.replace("store: default", f"{key}: sqlite")
    with pytest.warns(DeprecationWarning, match=rf"'{key}' is deprecated, write 'store'"):
        scenario = load_scenario(_scenario(tmp_path / "sdk" / "o", meta=old))
    assert scenario.stores(["a"]) == ["sqlite"]
    with pytest.warns(DeprecationWarning, match=r"Scenario\.persistences is deprecated"):
        assert scenario.persistences(["a"]) == ["sqlite"]


def test_the_new_key_wins_over_an_old_one(tmp_path: Path) -> None:
    both = META.replace("store: default", "store: jsonl\npersistence: sqlite")
    with pytest.warns(DeprecationWarning, match="persistence"):
        assert load_scenario(_scenario(tmp_path / "sdk" / "b", meta=both)).stores(["a"]) == [
            "jsonl"
        ]


@pytest.mark.parametrize(
    ("meta", "loop"),
    [
        (META, "current"),  # a new scenario records with the current loop
        (META + "loop: june\n", "june"),
        (META + "loop: current\n", "current"),
    ],
)
def test_snapshot_yml_names_the_loop_profile(tmp_path: Path, meta: str, loop: str) -> None:
    scenario = load_scenario(_scenario(tmp_path / "sdk" / "l", meta=meta))
    assert scenario.loop == loop
    assert scenario.meta is not None
    recorded = with_provenance(meta, "scripted", None, scenario.meta.loop)
    assert f"\nloop: {loop}\n" in recorded
    assert recorded.count("loop:") == 1


@pytest.mark.parametrize(
    ("logs", "loop"),
    [
        ([], "june"),
        ([HEADER + '{"type":"turn/start","data":{"turn":1}}\n'], "june"),
        ([HEADER.replace('"createdAt":0', '"createdAt":0,"delegationDepth":0')], "current"),
        ([HEADER, HEADER + '{"type":"request/header","data":{}}\n'], "current"),
        ([HEADER + '{"type":"session/end-seed","data":{}}\n'], "current"),
        ([HEADER + "not json\n[1]\n"], "june"),
    ],
)
def test_an_upstream_folders_era_is_detected_from_its_logs(
    tmp_path: Path, logs: list[str], loop: str
) -> None:
    folder = _scenario(tmp_path / "up" / "x", meta=None)
    (folder / "stdout.golden.jsonl").write_text("")
    for index, text in enumerate(logs):
        name = "session.jsonl" if index == 0 else f"session.{index}.jsonl"
        (folder / name).write_text(text)
    assert load_scenario(folder).loop == loop


@pytest.mark.parametrize("era", ["june", "head"])
def test_the_corpus_eras_are_detected(era: str) -> None:
    root = CORPUS / era
    if not root.is_dir():
        corpus_unavailable(f"upstream corpus not found at {CORPUS} (set DSH_UPSTREAM_CORPUS)")
    expected = "june" if era == "june" else "current"
    folders = [f for f in sorted(root.iterdir()) if (f / "session.jsonl").is_file()]
    # Logs only: head folders may hold harness ops the runner does not take yet.
    loops = {
        f.name: detect_loop_profile([f / "session.jsonl", *sorted(f.glob("session.*.jsonl"))])
        for f in folders
    }
    assert loops == dict.fromkeys(loops, expected)

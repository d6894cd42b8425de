"""The written, strict scenario format: shipped schemas, strict input.json, ``new``, and what
makes a folder ours or upstream's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from dsh_core.testing import corpus_unavailable, upstream_corpus
from dsh_scripted_server import load_script_file
from dsh_snapshot import ScenarioError, load_scenario
from dsh_snapshot._scaffold import mark_scripted, scaffold_scenario
from dsh_snapshot.cli import main
from dsh_snapshot.schemas import SCHEMA_DIR, SCHEMA_FILES, schema_problems, write_schemas

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "packages" / "snapshot" / "README.md"
CORPUS = upstream_corpus(__file__)
META = "version: 1\nprofile: sdk\nrecording: scripted\n"


def _validator(scenario_file: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / SCHEMA_FILES[scenario_file][0]).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(
    validator: jsonschema.Draft202012Validator, doc: Any
) -> list[jsonschema.ValidationError]:
    found = validator.iter_errors(doc)  # pyright: ignore[reportUnknownMemberType]
    return list(found)


def _read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    return yaml.safe_load(text) if path.suffix == ".yml" else json.loads(text)


def _scenario(folder: Path, steps: list[dict[str, Any]], meta: str | None = META) -> Path:
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(json.dumps({"steps": steps}))
    if meta is not None:
        (folder / "snapshot.yml").write_text(meta)
    return folder


# --- the shipped schemas -------------------------------------------------------------------------


def test_the_committed_schemas_are_generated_from_the_models() -> None:
    assert schema_problems() == []


def test_a_stale_or_missing_schema_is_named(tmp_path: Path) -> None:
    assert sorted(write_schemas(tmp_path)) == sorted(name for name, _ in SCHEMA_FILES.values())
    assert write_schemas(tmp_path) == []
    (tmp_path / "input.schema.json").write_text("{}\n")
    (tmp_path / "snapshot.schema.json").unlink()
    assert schema_problems(tmp_path) == [
        f"{tmp_path / 'input.schema.json'}: stale (run python -m dsh_snapshot.schemas)",
        f"{tmp_path / 'snapshot.schema.json'}: missing",
    ]


def test_the_schemas_ship_in_the_package() -> None:
    names = {path.name for path in SCHEMA_DIR.glob("*.schema.json")}
    assert names == {name for name, _ in SCHEMA_FILES.values()}


def _committed() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "snapshots").glob("*/*/input.json"))


@pytest.mark.parametrize("folder", _committed(), ids=lambda p: p.name)
def test_every_committed_scenario_matches_the_schemas(folder: Path) -> None:
    checked = 0
    for scenario_file in SCHEMA_FILES:
        path = folder / scenario_file
        if path.is_file():
            errors = [e.message for e in _errors(_validator(scenario_file), _read(path))]
            assert errors == [], f"{path}: {errors}"
            checked += 1
    assert checked >= 3  # input.json, snapshot.yml and a script or an override
    if (folder / "model.script.json").is_file():
        load_script_file(folder / "model.script.json")
    load_scenario(folder)


def _upstream() -> list[Path]:
    if CORPUS is None:
        return []
    return sorted(p.parent for p in CORPUS.glob("*/*/input.json"))


def test_every_upstream_folder_matches_or_its_needs_are_reported() -> None:
    if CORPUS is None:
        corpus_unavailable("upstream corpus not found")
    folders = _upstream()
    assert len(folders) >= 40
    steps_schema = _validator("input.json")
    override_schema = _validator("replay.override.json")
    outside: list[str] = []
    for folder in folders:
        scenario = load_scenario(folder)  # upstream: read leniently, never a crash
        assert scenario.meta is None
        doc = _read(folder / "input.json")
        needs = scenario.needs(recordings=False)
        for error in _errors(steps_schema, doc):
            where = list(error.absolute_path)
            if where[:1] == ["steps"] and len(where) >= 2:
                op = doc["steps"][where[1]]["op"]
                # An op we lack, or a field of a known op we do not honour, is a need.
                if not any(n == f"op {op}" or n.startswith(f"op {op} with") for n in needs):
                    outside.append(f"{folder}: {error.message}")
            elif set(doc) - {"steps"}:
                continue  # upstream's later top-level keys (permissionAnswers): not ours
            else:
                outside.append(f"{folder}: {error.message}")
        override = folder / "replay.override.json"
        if override.is_file():
            errors = [e.message for e in _errors(override_schema, _read(override))]
            assert errors == [], f"{override}: {errors}"
    assert outside == []


# --- strict input.json of our own scenarios ---------------------------------------------------


@pytest.mark.parametrize(
    ("step", "field"),
    [
        ({"op": "prompt", "text": "hi", "timout": 5}, "steps.0.timout"),
        ({"op": "newSession", "cwdd": "x"}, "steps.0.cwdd"),
        ({"op": "initialize", "terminalOutput": "yes"}, "steps.0.terminalOutput"),
        ({"op": "promt", "text": "hi"}, "steps.0.op"),
        ({"op": "promptAndCancel"}, "steps.0.text"),
    ],
)
def test_a_misspelt_step_of_ours_is_an_error_naming_file_and_field(
    tmp_path: Path, step: dict[str, Any], field: str
) -> None:
    folder = _scenario(tmp_path / "sdk" / "s", [step])
    with pytest.raises(ScenarioError) as caught:
        load_scenario(folder)
    assert caught.value.path == folder.resolve() / "input.json"
    assert caught.value.field == field


def test_an_unknown_top_level_key_of_ours_is_an_error(tmp_path: Path) -> None:
    folder = _scenario(tmp_path / "sdk" / "s", [{"op": "initialize"}])
    (folder / "input.json").write_text('{"steps": [{"op": "initialize"}], "stpes": []}')
    with pytest.raises(ScenarioError, match=r"input\.json: field 'stpes': Extra inputs"):
        load_scenario(folder)


def test_an_upstream_folder_with_an_unknown_op_loads_and_reports_the_need(tmp_path: Path) -> None:
    folder = _scenario(
        tmp_path / "june" / "u", [{"op": "initialize"}, {"op": "waitForTurnEnd"}], meta=None
    )
    (folder / "stdout.golden.jsonl").write_text("")
    scenario = load_scenario(folder)
    assert scenario.meta is None
    assert scenario.needs() == ["op waitForTurnEnd"]


def test_a_folder_with_neither_ours_nor_upstreams_file_is_refused(tmp_path: Path) -> None:
    folder = _scenario(tmp_path / "sdk" / "bare", [{"op": "initialize"}], meta=None)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(folder)
    assert caught.value.path == folder.resolve() / "snapshot.yml"
    assert "needs snapshot.yml" in caught.value.reason
    assert "stdout.golden.jsonl" in caught.value.reason
    # an expected stdout alone, or beside our model script, does not make it upstream's
    (folder / "stdout.expected.jsonl").write_text("")
    with pytest.raises(ScenarioError, match="has neither"):
        load_scenario(folder)
    (folder / "session.jsonl").write_text("")
    (folder / "model.script.json").write_text('{"sessions": []}')
    with pytest.raises(ScenarioError, match="has neither"):
        load_scenario(folder)
    # upstream's later harness: stdout.expected.jsonl beside session.jsonl, no script
    (folder / "model.script.json").unlink()
    assert load_scenario(folder).meta is None


def test_the_cli_names_the_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _scenario(tmp_path / "sdk" / "bare", [{"op": "initialize"}], meta=None)
    assert main(["list", str(folder)]) == 2
    assert "needs snapshot.yml" in capsys.readouterr().out


# --- dsh-snapshot new and record --scripted ---------------------------------------------------


def test_new_scaffolds_a_valid_scripted_scenario(tmp_path: Path) -> None:
    folder = scaffold_scenario("hello", tmp_path / "sdk")
    scenario = load_scenario(folder)
    assert scenario.meta is not None
    assert (scenario.meta.recording, scenario.meta.loop, scenario.meta.profile) == (
        "scripted",
        "current",
        "sdk",
    )
    assert [s.op for s in scenario.steps] == ["initialize", "newSession", "prompt"]
    assert len(load_script_file(folder / "model.script.json")) == 1
    for scenario_file in ("input.json", "snapshot.yml", "model.script.json"):
        errors = _errors(_validator(scenario_file), _read(folder / scenario_file))
        assert errors == [], scenario_file
    assert scenario.needs() == []


def test_new_refuses_an_existing_folder_and_a_bad_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parent = tmp_path / "sdk"
    assert main(["new", "hello", "--dir", str(parent)]) == 0
    before = (parent / "hello" / "input.json").read_text()
    (parent / "hello" / "input.json").write_text(before.replace("Say hello.", "Edited."))
    assert main(["new", "hello", "--dir", str(parent)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert "Edited." in (parent / "hello" / "input.json").read_text()
    for bad in ("../out", "a/b", ".hidden", ""):
        with pytest.raises(ScenarioError, match="not a plain folder name"):
            scaffold_scenario(bad, parent)
    assert sorted(p.name for p in parent.iterdir()) == ["hello"]


def test_record_scripted_marks_a_bare_folder_ours_and_leaves_others(tmp_path: Path) -> None:
    bare = _scenario(tmp_path / "sdk" / "bare", [{"op": "initialize"}], meta=None)
    ours = _scenario(tmp_path / "sdk" / "ours", [{"op": "initialize"}], meta=META + "# kept\n")
    upstream = _scenario(tmp_path / "sdk" / "up", [{"op": "initialize"}], meta=None)
    (upstream / "stdout.golden.jsonl").write_text("")
    assert mark_scripted([tmp_path, tmp_path / "missing"]) == [bare.resolve() / "snapshot.yml"]
    meta = load_scenario(bare).meta
    assert meta is not None
    assert (meta.recording, meta.profile) == ("scripted", "sdk")
    assert (ours / "snapshot.yml").read_text().endswith("# kept\n")
    assert not (upstream / "snapshot.yml").exists()


def test_record_scripted_never_marks_through_a_linked_scenario_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Red team 4 F2: ``snapshots -> ../victim`` was refused only after the target tree had
    been walked and given a ``snapshot.yml`` in every folder holding an ``input.json``."""
    victim = _scenario(tmp_path / "victim" / "sdk" / "x", [{"op": "initialize"}], meta=None)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "snapshots").symlink_to(tmp_path / "victim")
    monkeypatch.chdir(checkout)
    assert mark_scripted([Path("snapshots"), Path("snapshots/sdk/x")]) == []
    assert main(["record", "--scripted", "snapshots"]) == 2
    assert "symbolic link" in capsys.readouterr().out
    assert sorted(p.name for p in victim.iterdir()) == ["input.json"]


# --- the README documents the format ----------------------------------------------------------


def _names(schema: Any) -> set[str]:
    """Every property name and every ``const``/``enum`` string of a schema, at any depth."""
    found: set[str] = set()
    if isinstance(schema, dict):
        node: dict[str, Any] = schema  # pyright: ignore[reportUnknownVariableType]
        props = node.get("properties")
        if isinstance(props, dict):
            found |= set(props)  # pyright: ignore[reportUnknownArgumentType]
        if isinstance(node.get("const"), str):
            found.add(node["const"])
        if isinstance(node.get("enum"), list):
            found |= {v for v in node["enum"] if isinstance(v, str)}  # pyright: ignore
        for value in node.values():
            found |= _names(value)
    elif isinstance(schema, list):
        for value in schema:  # pyright: ignore[reportUnknownVariableType]
            found |= _names(value)
    return found


def test_the_readme_names_every_op_and_field_of_the_schemas() -> None:
    text = README.read_text(encoding="utf-8")
    words = set(re.findall(r"[A-Za-z_][\w-]*", text))
    missing = {
        scenario_file: sorted(_names(_read(SCHEMA_DIR / name)) - words)
        for scenario_file, (name, _) in SCHEMA_FILES.items()
    }
    assert missing == {f: [] for f in SCHEMA_FILES}

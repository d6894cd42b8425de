"""``tools/record_contract.py`` copies the committed scenario tree before recording into it: a
link a pull request planted there must never bring outside files into the copy."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "record_contract", ROOT / "tools" / "record_contract.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    scenario = tmp_path / "snapshots" / "sdk" / "x"
    (scenario / "workspace").mkdir(parents=True)
    (scenario / "input.json").write_text("{}")
    (scenario / "workspace" / "notes.txt").write_text("mine")
    return tmp_path


def test_a_link_out_of_the_tree_is_refused_naming_it(tree: Path) -> None:
    secret = tree / "home" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_ed25519").write_text("PRIVATE")
    link = tree / "snapshots" / "sdk" / "x" / "workspace" / "ssh"
    link.symlink_to(secret)
    tool = _tool()
    with pytest.raises(tool.OutsideLinkError) as caught:
        tool.copy_scenario_tree(tree / "snapshots", tree / "copy")
    assert str(caught.value).startswith(f"{link}: a link out of the scenario tree (to {secret})")
    copied = tree / "copy" / "sdk" / "x" / "workspace" / "ssh"
    assert copied.is_symlink()  # kept as a link, never its target's files
    assert not any(p.name == "id_ed25519" for p in (tree / "copy").rglob("*"))


def test_files_and_links_inside_the_tree_are_copied_as_they_are(tree: Path) -> None:
    workspace = tree / "snapshots" / "sdk" / "x" / "workspace"
    (workspace / "alias.txt").symlink_to("notes.txt")
    _tool().copy_scenario_tree(tree / "snapshots", tree / "copy")
    copied = tree / "copy" / "sdk" / "x" / "workspace"
    assert (copied / "notes.txt").read_text() == "mine"
    assert os.readlink(copied / "alias.txt") == "notes.txt"

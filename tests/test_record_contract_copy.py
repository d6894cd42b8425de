"""``tools/record_contract.py`` copies the scenario tree with its links as links (red team F16):
a pull request's ``workspace -> ~/.ssh`` must reach the gate as the link it is, which the gate
refuses, never as copies of the files it names."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_links_of_the_tree_stay_links(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "record_contract", ROOT / "tools/record_contract.py"
    )
    assert spec is not None
    assert spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    secrets = tmp_path / "home" / ".ssh"
    secrets.mkdir(parents=True)
    (secrets / "id_ed25519").write_text("private\n")
    scenario = tmp_path / "snapshots" / "sdk" / "linked"
    scenario.mkdir(parents=True)
    (scenario / "workspace").symlink_to(secrets)
    (scenario / "notes.txt").symlink_to(secrets / "id_ed25519")
    copy = tmp_path / "copy"
    tool.copy_scenarios(tmp_path / "snapshots", copy)
    copied = copy / "sdk" / "linked"
    assert (copied / "workspace").is_symlink()
    assert (copied / "notes.txt").is_symlink()
    assert not any(p.name == "id_ed25519" and not p.is_symlink() for p in copy.rglob("*"))

"""One release: every package at one version, siblings pinned to it, complete metadata.

``tools/version.py`` keeps the versions; these tests fail when a package (including one added
later: packages are found by glob) drifts from the others or lacks what PyPI shows.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ROLES = sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml"))


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` as a module (registered first: its dataclasses look themselves up)."""
    qualified = f"dsh_tools_{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, ROOT / "tools" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module


version = load_tool("version")


def project(role: str) -> dict[str, Any]:
    return tomllib.loads((ROOT / "packages" / role / "pyproject.toml").read_text())["project"]


def test_the_workspace_is_one_release() -> None:
    assert version.problems(ROOT) == []
    assert re.fullmatch(r"\d+\.\d+\.\d+", version.workspace_version(ROOT))


@pytest.mark.parametrize("role", ROLES)
def test_metadata_is_complete(role: str) -> None:
    meta = project(role)
    assert meta["name"] == f"dsh-{role}"
    assert meta["description"].strip()
    assert meta["readme"] == "README.md"
    assert meta["license"] == "MIT"
    assert meta["license-files"] == ["LICENSE"]
    assert meta["requires-python"] == ">=3.11"
    assert meta["keywords"]
    assert meta["authors"]
    classifiers = set(meta["classifiers"])
    assert {"Typing :: Typed", "Programming Language :: Python :: 3.11"} <= classifiers
    assert not any(c.startswith("License ::") for c in classifiers), "PEP 639: license only"
    urls = meta["urls"]
    assert {"Homepage", "Source", "Changelog", "Issues"} <= set(urls)
    assert urls["Source"].endswith(f"/packages/{role}")
    # The licence hatchling ships in the wheel and sdist is the repository's, word for word.
    assert (ROOT / "packages" / role / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()


@pytest.mark.parametrize("role", ROLES)
def test_every_readme_opens_with_an_example_that_asserts(role: str) -> None:
    # nox -s release_check runs this block against the installed wheel.
    readme = ROOT / "packages" / role / "README.md"
    example = load_tool("check_wheels").readme_example(readme)
    assert "assert " in example, f"{readme}: the first python block checks nothing"
    compile(example, str(readme), "exec")


def copy_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for pyproject in [ROOT / "pyproject.toml", *ROOT.glob("packages/*/pyproject.toml")]:
        target = root / pyproject.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pyproject, target)
    shutil.copyfile(ROOT / "CHANGELOG.md", root / "CHANGELOG.md")
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_diverging_version_is_found(tmp_path: Path) -> None:
    root = copy_workspace(tmp_path)
    current = version.workspace_version(root)
    edit(root / "packages/core/pyproject.toml", f'version = "{current}"', 'version = "9.9.9"')
    [problem] = version.problems(root)
    assert "different versions" in problem
    assert "dsh-core 9.9.9" in problem


def test_an_unpinned_or_loosely_pinned_sibling_is_found(tmp_path: Path) -> None:
    root = copy_workspace(tmp_path)
    current = version.workspace_version(root)
    pyproject = root / "packages/persistence-jsonl/pyproject.toml"
    edit(pyproject, f'"dsh-core=={current}"', '"dsh-core>=0.1"')
    [problem] = version.problems(root)
    assert "persistence-jsonl/pyproject.toml" in problem
    assert f"'dsh-core=={current}'" in problem


def test_a_sibling_without_a_workspace_source_and_a_missing_changelog_entry_are_found(
    tmp_path: Path,
) -> None:
    root = copy_workspace(tmp_path)
    edit(root / "pyproject.toml", "dsh-core = { workspace = true }\n", "")
    (root / "CHANGELOG.md").write_text("# Changelog\n")
    problems = version.problems(root)
    assert any("needs dsh-core = { workspace = true }" in p for p in problems)
    assert any("CHANGELOG.md has no" in p for p in problems)


def test_bump_moves_every_package_and_pin_together(tmp_path: Path) -> None:
    root = copy_workspace(tmp_path)
    written = version.bump("7.8.9", root)
    assert len(written) == len(ROLES)
    assert version.workspace_version(root) == "7.8.9"
    problems = version.problems(root)
    assert problems == ["CHANGELOG.md has no '## [7.8.9]' section"]
    snapshot = tomllib.loads((root / "packages/snapshot/pyproject.toml").read_text())["project"]
    assert "dsh-core==7.8.9" in snapshot["dependencies"]
    assert "pyyaml>=6.0" in snapshot["dependencies"]  # third-party requirements untouched
    assert version.bump("7.8.9", root) == []  # idempotent


def test_bump_refuses_a_version_that_is_not_a_release(tmp_path: Path) -> None:
    root = copy_workspace(tmp_path)
    with pytest.raises(version.VersionError, match=r"not a X\.Y\.Z release version"):
        version.bump("next", root)


def test_pin_text_rewrites_only_dependency_arrays() -> None:
    text = (
        '[project]\nname = "dsh-a"\nversion = "1.0.0"\n'
        'dependencies = [\n  "dsh-b",\n  "httpx[http2]>=0.27",\n]\n'
        "[project.optional-dependencies]\nextra = [\"dsh-b>=0.1 ; python_version >= '3.11'\"]\n"
        '[project.scripts]\ndsh-b = "dsh_b:main"\n'
    )
    out = version.pin_text(text, "2.0.0", {"dsh-a", "dsh-b"})
    parsed = tomllib.loads(out)
    assert parsed["project"]["version"] == "2.0.0"
    assert parsed["project"]["dependencies"] == ["dsh-b==2.0.0", "httpx[http2]>=0.27"]
    extra = parsed["project"]["optional-dependencies"]["extra"]
    assert extra == ["dsh-b==2.0.0 ; python_version >= '3.11'"]
    assert parsed["project"]["scripts"] == {"dsh-b": "dsh_b:main"}


def test_the_command_line_checks_a_tag(capsys: pytest.CaptureFixture[str]) -> None:
    current = version.workspace_version(ROOT)
    assert version.main(["check", "--tag", f"v{current}"]) == 0
    assert version.main(["check", "--tag", "v0.0.0-wrong"]) == 1
    assert "is not the workspace version" in capsys.readouterr().err
    assert version.main(["frobnicate"]) == 2


def test_the_release_workflow_checks_then_publishes_by_trusted_publishing() -> None:
    workflow = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    # PyYAML reads the bare key `on` as True.
    assert workflow[True] == {"push": {"tags": ["v*"]}}
    check, publish = workflow["jobs"]["check"], workflow["jobs"]["publish"]
    commands = [step.get("run", "") for step in check["steps"]]
    assert 'python tools/version.py check --tag "${GITHUB_REF_NAME}"' in commands
    assert "python tools/bootstrap.py -s release_check" in commands
    assert publish["needs"] == "check"
    assert publish["environment"]["name"] == "pypi"
    assert publish["permissions"] == {"id-token": "write"}
    assert "id-token" not in workflow["permissions"]  # only the publishing job holds it
    uses = [step.get("uses", "") for step in publish["steps"]]
    assert "pypa/gh-action-pypi-publish@release/v1" in uses

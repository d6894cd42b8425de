"""``tools/check_wheels.py`` (nox -s build, release_check): installs alone, offline, and runs."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_tool() -> ModuleType:
    name = "dsh_tools_check_wheels"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools/check_wheels.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # registered first: its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def write_wheel(dist: Path, role: str, source: str, requires: list[str]) -> None:
    """A minimal valid wheel for ``dsh-<role>`` holding ``dsh_<role>/__init__.py``."""
    name = f"dsh_{role.replace('-', '_')}"
    info = f"{name}-0.1.0.dist-info"
    metadata = "".join(
        [f"Metadata-Version: 2.1\nName: dsh-{role}\nVersion: 0.1.0\n"]
        + [f"Requires-Dist: {r}\n" for r in requires]
    )
    files = {
        f"{name}/__init__.py": source,
        f"{info}/METADATA": metadata,
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(dist / f"{name}-0.1.0-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


def test_build_check_fails_on_an_undeclared_sibling_and_passes_when_declared(
    tmp_path: Path,
) -> None:
    tool = load_tool()
    dist = tmp_path / "dist"
    dist.mkdir()
    write_wheel(dist, "beta", "VALUE = 1\n", [])
    write_wheel(dist, "alpha", "import dsh_beta\n", [])
    outcome = tool.check(dist, None, "alpha")
    assert outcome.ok is False
    assert "No module named 'dsh_beta'" in outcome.log

    # Declared: pip --no-index takes the sibling from the same folder.
    (dist / "dsh_alpha-0.1.0-py3-none-any.whl").unlink()
    write_wheel(dist, "alpha", "import dsh_beta\n", ["dsh-beta==0.1.0"])
    assert tool.check(dist, None, "alpha").ok is True


def test_a_declared_dependency_missing_from_the_folders_fails_the_install(tmp_path: Path) -> None:
    tool = load_tool()
    dist = tmp_path / "dist"
    dist.mkdir()
    write_wheel(dist, "alpha", "VALUE = 1\n", ["not-in-any-folder>=1"])
    outcome = tool.check(dist, None, "alpha")
    assert outcome.ok is False
    assert "not-in-any-folder" in outcome.log  # pip could not find it: nothing came from an index


def test_the_readme_example_runs_against_the_installed_wheel(tmp_path: Path) -> None:
    tool = load_tool()
    dist, root = tmp_path / "dist", tmp_path / "repo"
    dist.mkdir()
    (root / "packages" / "alpha").mkdir(parents=True)
    write_wheel(dist, "alpha", "VALUE = 1\n", [])
    readme = root / "packages" / "alpha" / "README.md"
    readme.write_text("# alpha\n\n```python\nimport dsh_alpha\nassert dsh_alpha.VALUE == 2\n```\n")
    outcome = tool.check(dist, None, "alpha", examples=True, root=root)
    assert outcome.ok is False
    assert "AssertionError" in outcome.log
    readme.write_text(readme.read_text().replace("== 2", "== 1"))
    assert tool.check(dist, None, "alpha", examples=True, root=root).ok is True


def test_an_example_installs_only_what_its_pip_line_names(tmp_path: Path) -> None:
    tool = load_tool()
    dist, root = tmp_path / "dist", tmp_path / "repo"
    dist.mkdir()
    (root / "packages" / "alpha").mkdir(parents=True)
    write_wheel(dist, "alpha", "VALUE = 1\n", [])
    write_wheel(dist, "beta", "VALUE = 2\n", [])
    readme = root / "packages" / "alpha" / "README.md"
    body = "import dsh_alpha\nimport dsh_beta\nassert dsh_alpha.VALUE + dsh_beta.VALUE == 3\n"
    readme.write_text(f"# alpha\n\n```python\n{body}```\n")
    # Undeclared and not named: the example cannot import the sibling.
    outcome = tool.check(dist, None, "alpha", examples=True, root=root)
    assert outcome.ok is False
    assert "No module named 'dsh_beta'" in outcome.log
    # Named on the example's first line, as a reader would run it: installed, then it runs.
    readme.write_text(f"# alpha\n\n```python\n# pip install dsh-alpha dsh-beta\n{body}```\n")
    assert tool.check(dist, None, "alpha", examples=True, root=root).ok is True
    assert tool.example_requirements("# pip install dsh-a dsh-b\nx = 1\n") == ["dsh-a", "dsh-b"]
    assert tool.example_requirements("x = 1\n# pip install dsh-a\n") == []


def test_a_readme_without_a_python_block_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# nothing to run\n")
    with pytest.raises(SystemExit, match="has no ```python example block"):
        load_tool().readme_example(readme)

"""``tools/check_wheels.py`` (nox -s build) catches a package importing an undeclared sibling."""

from __future__ import annotations

import importlib.util
import shutil
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_wheels", ROOT / "tools/check_wheels.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
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


def write_project(root: Path, role: str, requires: list[str]) -> None:
    folder = root / "packages" / role
    folder.mkdir(parents=True)
    deps = ", ".join(f'"{r}"' for r in requires)
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "dsh-{role}"\nversion = "0.1.0"\ndependencies = [{deps}]\n'
    )


@pytest.fixture
def uv() -> str:
    found = shutil.which("uv")
    if found is None:
        pytest.skip("uv is not on PATH (nox puts it there)")
    return found


def test_build_check_fails_on_an_undeclared_sibling_and_passes_when_declared(
    tmp_path: Path, uv: str
) -> None:
    tool = load_tool()
    root, dist = tmp_path / "repo", tmp_path / "dist"
    dist.mkdir()
    write_wheel(dist, "beta", "VALUE = 1\n", [])
    write_wheel(dist, "alpha", "import dsh_beta\n", [])
    write_project(root, "alpha", [])
    write_project(root, "beta", [])
    assert tool.check(dist, "alpha", uv, root) is False

    (dist / "dsh_alpha-0.1.0-py3-none-any.whl").unlink()
    write_wheel(dist, "alpha", "import dsh_beta\n", ["dsh-beta"])
    shutil.rmtree(root / "packages" / "alpha")
    write_project(root, "alpha", ["dsh-beta"])
    assert tool.declared_siblings("alpha", root) == {"beta"}
    assert tool.check(dist, "alpha", uv, root) is True

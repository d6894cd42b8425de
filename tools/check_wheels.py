"""Install each built wheel alone in a clean venv and import every module it ships.

A package that imports a sibling it does not declare fails here: only the wheel, the sibling
wheels it declares (transitively) and their third-party dependencies are installed.

Usage: ``python tools/check_wheels.py DIST_DIR ROLE [ROLE ...]`` (roles are folder names under
``packages/``, e.g. ``core``, ``persistence-jsonl``).
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Runs inside the fresh venv: import every module of the package; report what is missing.
_IMPORT_ALL = r"""
import importlib, pkgutil, sys
top = sys.argv[1]
package = importlib.import_module(top)
failures, imported = [], 1
for info in pkgutil.walk_packages(package.__path__, top + "."):
    try:
        importlib.import_module(info.name)
        imported += 1
    except ModuleNotFoundError as exc:
        missing = exc.name or "?"
        optional_ok = (not missing.startswith("dsh_")) and (
            ".testing" in info.name or info.name.endswith("pytest_plugin"))
        if not optional_ok:
            failures.append(f"{info.name}: cannot import {missing!r}")
for line in failures:
    print("FAIL", line)
print(f"imported {imported} modules of {top}")
sys.exit(1 if failures else 0)
"""


def _dist_name(role: str) -> str:
    return f"dsh-{role}"


def declared_siblings(role: str, root: pathlib.Path = ROOT) -> set[str]:
    """Roles of the dsh-* distributions ``role`` depends on, transitively."""
    seen: set[str] = set()
    todo = [role]
    while todo:
        current = todo.pop()
        project = tomllib.loads((root / "packages" / current / "pyproject.toml").read_text())
        for requirement in project["project"].get("dependencies", []):
            match = re.match(r"dsh-([a-z-]+)", requirement)
            if match and match.group(1) not in seen:
                seen.add(match.group(1))
                todo.append(match.group(1))
    return seen


def _wheel(dist: pathlib.Path, role: str) -> pathlib.Path:
    stem = _dist_name(role).replace("-", "_")
    wheels = sorted(dist.glob(f"{stem}-*.whl"))
    if not wheels:
        raise SystemExit(f"check_wheels: no wheel for {_dist_name(role)} in {dist}")
    return wheels[-1]


def check(dist: pathlib.Path, role: str, uv: str, root: pathlib.Path = ROOT) -> bool:
    """Install ``role``'s wheel with only its declared siblings and import all of it."""
    siblings = sorted(declared_siblings(role, root))
    wheels = [_wheel(dist, role)] + [_wheel(dist, r) for r in siblings]
    module = "dsh_" + role.replace("-", "_")
    with tempfile.TemporaryDirectory(prefix=f"wheel-{role}-") as tmp:
        venv = pathlib.Path(tmp) / "venv"
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
        python = venv / "bin" / "python"
        subprocess.run(
            [uv, "pip", "install", "--quiet", "--python", str(python), *map(str, wheels)],
            check=True,
        )
        result = subprocess.run(
            [str(python), "-c", _IMPORT_ALL, module], capture_output=True, text=True, check=False
        )
    status = "ok" if result.returncode == 0 else "FAILED"
    print(f"{_dist_name(role):24} {status}: {result.stdout.strip().splitlines()[-1:]}")
    if result.returncode != 0:
        print(result.stdout + result.stderr)
    return result.returncode == 0


def main(argv: list[str]) -> int:
    """Check every role given on the command line; exit 1 if any fails."""
    if len(argv) < 2:
        print(__doc__)
        return 2
    uv = shutil.which("uv")
    if uv is None:
        print("check_wheels: uv is not on PATH (run through nox)")
        return 2
    dist = pathlib.Path(argv[0])
    results = [check(dist, role, uv) for role in argv[1:]]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

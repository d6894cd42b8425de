"""Install each built wheel alone, offline, in a fresh venv; import all of it; run its README.

This is the one install path behind ``nox -s build`` and ``nox -s release_check``:

1. ``wheelhouse DIR`` fills DIR with the locked third-party wheels (``uv export`` of every
   member's runtime dependencies, fetched with ``pip download --require-hashes``) and the
   hatchling build backend, so every later install runs with ``pip --no-index``: nothing comes
   from an index, the siblings come from the built folder and only what the wheels declare is
   installed. A second run with the same lock reuses DIR.
2. ``check DIST WHEELHOUSE ROLE...`` creates a stdlib venv per role, has the locked pip
   (``--python VENV``) run ``pip install --no-index --only-binary :all: --find-links DIST
   --find-links WHEELHOUSE dsh-<role>`` (the README's ``pip install dsh-<role>``, the built
   folder standing in for PyPI), imports every module of the package (a
   package that imports a sibling it does not declare fails here), and with ``--examples``
   runs the first ```python block of ``packages/<role>/README.md`` in an empty folder.

Roles are folder names under ``packages/`` (``core``, ``persistence-jsonl``, ...).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import venv
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE_TIMEOUT_S = 120
# Two installs at once: the CI machines and the shared dev machine have two cores.
PARALLEL = 2

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

_FIRST_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Outcome:
    """What checking one role found: whether it passed and what it printed."""

    role: str
    ok: bool
    log: str


def readme_example(readme: pathlib.Path) -> str:
    """The first ```python block of ``readme``; SystemExit naming the file if there is none."""
    match = _FIRST_PYTHON_BLOCK.search(readme.read_text())
    if match is None:
        raise SystemExit(f"check_wheels: {readme} has no ```python example block")
    return match.group(1)


_PIP_INSTALL_LINE = re.compile(r"^# pip install (?P<requirements>[A-Za-z0-9_.\-\[\] ]+)$")


def example_requirements(example: str) -> list[str]:
    """What an example says it needs besides its own package: its first line may read
    ``# pip install dsh-x dsh-y`` (shown to the reader, installed here before it runs)."""
    first = example.split("\n", 1)[0]
    match = _PIP_INSTALL_LINE.match(first)
    return match.group("requirements").split() if match else []


def wheel_for(dist: pathlib.Path, role: str) -> pathlib.Path:
    """The one wheel of ``dsh-<role>`` in ``dist``; SystemExit if it is missing."""
    stem = f"dsh_{role.replace('-', '_')}"
    wheels = sorted(dist.glob(f"{stem}-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"check_wheels: expected one wheel for dsh-{role} in {dist}: {wheels}")
    return wheels[0]


def fill_wheelhouse(wheelhouse: pathlib.Path, root: pathlib.Path = ROOT) -> None:
    """Download the locked third-party wheels and hatchling into ``wheelhouse`` (once per lock)."""
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit("check_wheels: uv is not on PATH (run through nox)")
    export = [uv, "export", "--frozen", "--all-packages", "--no-emit-workspace"]
    export += ["--no-default-groups", "--format", "requirements-txt", "--quiet"]
    locked = subprocess.run(export, cwd=root, capture_output=True, text=True, check=True).stdout
    stamp = wheelhouse / "requirements.txt"
    if stamp.is_file() and stamp.read_text() == locked:
        return
    wheelhouse.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)  # written last: a half-filled folder is filled again
    requirements = wheelhouse / "requirements.in"
    requirements.write_text(locked)
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary", ":all:"]
    download += ["--disable-pip-version-check", "--dest", str(wheelhouse)]
    # The build backend comes too, for installs from a source checkout (not in uv.lock).
    for what in (["--require-hashes", "-r", str(requirements)], ["hatchling>=1.27"]):
        done = subprocess.run([*download, *what], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"check_wheels: pip download failed:\n{done.stdout}{done.stderr}")
    stamp.write_text(locked)


def _run(args: list[str], cwd: pathlib.Path, env: dict[str, str]) -> tuple[bool, str]:
    try:
        result = subprocess.run(
            args,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=EXAMPLE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, f"$ {' '.join(args)}\ntimed out after {EXAMPLE_TIMEOUT_S}s\n"
    return result.returncode == 0, f"$ {' '.join(args)}\n{result.stdout}{result.stderr}"


def check(
    dist: pathlib.Path,
    wheelhouse: pathlib.Path | None,
    role: str,
    *,
    examples: bool = False,
    root: pathlib.Path = ROOT,
) -> Outcome:
    """Install ``role``'s wheel alone with pip --no-index, import all of it, run its example."""
    module = "dsh_" + role.replace("-", "_")
    wheel_for(dist, role)  # exactly one built wheel, or a clear error
    requirement = f"dsh-{role}"
    links = ["--find-links", str(dist)]
    if wheelhouse is not None:
        links += ["--find-links", str(wheelhouse)]
    with tempfile.TemporaryDirectory(prefix=f"wheel-{role}-") as tmp:
        folder = pathlib.Path(tmp)
        venv.EnvBuilder(with_pip=False).create(folder / "venv")
        python = str(folder / "venv" / "bin" / "python")
        # A clean environment: no key, no settings, no PYTHONPATH from the calling session.
        env = {"PATH": f"{folder / 'venv' / 'bin'}{os.pathsep}/usr/bin:/bin", "HOME": tmp}
        # pip reads no config file either: a machine-wide find-links or index cannot leak in.
        env["PIP_CONFIG_FILE"] = os.devnull
        # The locked pip of this session installs into the venv (ensurepip per venv is slow).
        install = [sys.executable, "-m", "pip", "--python", python, "install", "--quiet"]
        steps = [
            # By name, as `pip install dsh-<role>` from PyPI, with the built folder as the
            # index; wheels only, so the built wheel (not its sdist) is what gets checked.
            ([*install, "--no-index", "--only-binary", ":all:", *links, requirement], folder),
            ([python, "-c", _IMPORT_ALL, module], folder),
        ]
        if examples:
            work = folder / "example"
            work.mkdir()
            example = readme_example(root / "packages" / role / "README.md")
            (work / "example.py").write_text(example)
            # Only after the alone-import above: what the example itself says it needs.
            extra = [name for name in example_requirements(example) if name != requirement]
            if extra:
                pip = [*install, "--no-index", "--only-binary", ":all:", *links, *extra]
                steps.append((pip, folder))
            steps.append(([python, "example.py"], work))
        log, ok = "", True
        for args, cwd in steps:
            ok, output = _run(args, cwd, env)
            log += output
            if not ok:
                break
    return Outcome(role, ok, log)


def check_all(
    dist: pathlib.Path, wheelhouse: pathlib.Path | None, roles: list[str], *, examples: bool
) -> bool:
    """Check every role, two at a time; print one line each (and the log of a failure)."""

    def check_one(role: str) -> Outcome:
        return check(dist, wheelhouse, role, examples=examples)

    with ThreadPoolExecutor(PARALLEL) as pool:
        outcomes = list(pool.map(check_one, roles))
    for outcome in outcomes:
        what = "installed alone, imported" + (", README example ran" if examples else "")
        print(f"dsh-{outcome.role:22} {'ok' if outcome.ok else 'FAILED'}: {what}")
        if not outcome.ok:
            print(outcome.log)
    return all(outcome.ok for outcome in outcomes)


def main(argv: list[str]) -> int:
    """``wheelhouse DIR`` or ``check [--examples] DIST WHEELHOUSE ROLE...``; see the docstring."""
    if argv[:1] == ["wheelhouse"] and len(argv) == 2:
        fill_wheelhouse(pathlib.Path(argv[1]))
        return 0
    if argv[:1] == ["check"]:
        examples = "--examples" in argv
        rest = [arg for arg in argv[1:] if arg != "--examples"]
        if len(rest) >= 3:
            dist, wheelhouse = pathlib.Path(rest[0]).resolve(), pathlib.Path(rest[1]).resolve()
            return 0 if check_all(dist, wheelhouse, rest[2:], examples=examples) else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Run nox from a fresh machine that has only Python 3.11 and pip.

Creates ``.venv-nox`` (once) holding the pinned nox and uv from ``tools/requirements-nox.txt``,
then runs ``nox`` with the given arguments. ``python3 tools/bootstrap.py -s snapshot`` runs the
keyless gate; ``python3 tools/bootstrap.py -s tests`` runs the tests.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import venv

ROOT = pathlib.Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-nox"
REQUIREMENTS = ROOT / "tools" / "requirements-nox.txt"
STAMP = VENV / "requirements.stamp"


def main(argv: list[str]) -> int:
    """Ensure the tool venv matches the pinned requirements, then hand over to nox."""
    wanted = REQUIREMENTS.read_text()
    bin_dir = VENV / ("Scripts" if os.name == "nt" else "bin")
    if not STAMP.is_file() or STAMP.read_text() != wanted:
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
        subprocess.run(
            [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
            check=True,
        )
        STAMP.write_text(wanted)
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_PYTHON_PREFERENCE="only-system")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(bin_dir / "nox"), "-f", str(ROOT / "noxfile.py"), *argv],
        env=env,
        cwd=ROOT,
        check=False,
    ).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

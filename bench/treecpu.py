"""What the benchmarks share: the CPU of a whole process tree, and the environment they run in.

A sandboxed process's bubblewrap double-forks: its inner half is orphaned and reaped by init,
its CPU (the sandboxed program's included) lost to the parent's ``RUSAGE_CHILDREN``. The
wrapper here is a child subreaper (``PR_SET_CHILD_SUBREAPER``): it inherits every orphan of
the tree and reaps it, so the whole tree is counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["bytecode_env", "load_average", "tree"]

_TREE = """
import ctypes, json, os, resource, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": proc.returncode, "cpu": usage.ru_utime + usage.ru_stime,
                  "out": proc.stdout[-3000:]}))
"""


def tree(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``argv`` under the subreaper: ``code``, ``cpu`` (seconds, the whole tree) and the
    tail of its stdout (``out``)."""
    out = subprocess.run(
        [sys.executable, "-c", _TREE, *argv], env=env, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def bytecode_env(cache: Path) -> dict[str, str]:
    """This environment with a bytecode cache in ``cache``, even where the machine sets
    ``PYTHONDONTWRITEBYTECODE``: without one every interpreter recompiles what it imports."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def load_average() -> str:
    """The machine's load averages, for the report."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())

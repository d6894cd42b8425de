"""The in-process confinement's error paths (``dsh_core._self_confine``), each in a forked child.

A confinement cannot be undone, so every case forks: the child applies a plan with one system
call made to fail (its number swapped for one the kernel does not have: ``ENOSYS``) and reports
what happened through a pipe. A mechanism that is missing before anything changed is reported
(the caller decides: ``strict`` refuses, ``warn`` says it); one that fails after the file
system was changed in part stops the process in every mode.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_core import ProcessConfinement, _self_confine
from dsh_core._process_confine import confinement_plan
from dsh_core._seccomp import seccomp_program

pytestmark = pytest.mark.usefixtures("needs_sandbox")

_NO_SUCH_CALL = 1023  # below the kernel's first unused number range: ENOSYS everywhere


def _in_child(plan: dict[str, Any], broken: str | None, probe: Path) -> dict[str, Any]:
    """Apply ``plan`` in a forked child with the system call ``broken`` (a module constant)
    failing; what ``apply`` returned or raised, and whether ``probe`` could then be changed."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read_end)
        report: dict[str, Any] = {}
        try:
            if broken is not None:
                setattr(_self_confine, broken, _NO_SUCH_CALL)
            report["missing"] = _self_confine.apply(plan)
        except SystemError as exc:
            report["stopped"] = str(exc)
        try:
            os.chmod(probe, 0o600)
            report["chmod"] = "ok"
        except OSError as exc:
            report["chmod"] = os.strerror(exc.errno or 0)
        os.write(write_end, json.dumps(report).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as source:
        data = source.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.fixture
def plan(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "run").mkdir()
    return {
        "network": False,
        "writable": [str(tmp_path / "run")],
        "readable": [],
        "hide": [],
        "seccomp": base64.b64encode(seccomp_program(agent=True)).decode(),
    }


def test_the_whole_plan_applies_and_the_host_is_read_only(
    plan: dict[str, Any], tmp_path: Path
) -> None:
    probe = tmp_path / "probe.txt"
    probe.write_text("x")
    probe.chmod(0o644)
    assert _in_child(plan, None, probe) == {"missing": [], "chmod": os.strerror(30)}  # EROFS
    assert probe.stat().st_mode & 0o777 == 0o644


def test_a_kernel_without_mount_setattr_is_reported_before_anything_changes(
    plan: dict[str, Any], tmp_path: Path
) -> None:
    probe = tmp_path / "probe.txt"
    probe.write_text("x")
    seen = _in_child(plan, "_SYS_MOUNT_SETATTR", probe)
    assert seen["missing"] == [
        f"the file-system confinement (mount_setattr /: {os.strerror(38)})"  # ENOSYS
    ]
    assert seen["chmod"] == "ok"  # nothing of the file system was confined: said, not hidden


def test_a_kernel_without_open_tree_is_reported_before_anything_changes(
    plan: dict[str, Any], tmp_path: Path
) -> None:
    probe = tmp_path / "probe.txt"
    probe.write_text("x")
    seen = _in_child(plan, "_SYS_OPEN_TREE", probe)
    assert seen["missing"] == [
        f"the file-system confinement (open_tree {tmp_path / 'run'}: {os.strerror(38)})"
    ]


def test_a_failure_half_way_stops_the_process_in_every_mode(
    plan: dict[str, Any], tmp_path: Path
) -> None:
    probe = tmp_path / "probe.txt"
    probe.write_text("x")
    seen = _in_child(plan, "_SYS_MOVE_MOUNT", probe)
    assert seen["stopped"] == (
        f"the file-system confinement failed half way: move_mount {tmp_path / 'run'}: "
        f"{os.strerror(38)}"
    )


def _launch(*argv: str) -> subprocess.CompletedProcess[str]:
    script = _self_confine.__file__
    command = [sys.executable, "-I", "-S", script, *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_the_launcher_refuses_bad_usage_and_says_what_it_cannot_start(tmp_path: Path) -> None:
    usage = _launch("{}")
    assert (usage.returncode, usage.stderr) == (2, "usage: _self_confine.py PLAN -- ARGV...\n")
    missing = tmp_path / "no-such-program"
    done = _launch(json.dumps({"mode": "warn", "seccomp": None}), "--", str(missing))
    assert done.returncode == 127
    assert done.stderr == (
        "dsh-acp-agent: confined without the seccomp filter\n"
        f"dsh-acp-agent: cannot start {missing}: {os.strerror(2)}\n"
    )


def test_a_bytecode_cache_the_caller_set_is_readable_never_writable(tmp_path: Path) -> None:
    cache, cwd = tmp_path / "pycache", tmp_path / "cwd"
    cache.mkdir()
    cwd.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPYCACHEPREFIX": str(cache)}
    plan = confinement_plan(ProcessConfinement(network=False), str(cwd), env)
    assert str(cache.resolve()) in plan["readable"]
    assert plan["writable"] == [str(cwd.resolve())]
    assert "/tmp" in plan["hide"]  # where such a cache often lies: hidden, but for it

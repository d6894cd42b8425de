"""A cold agent's start-up (issue #11): what it imports, and its CPU to a served ``initialize``.

Each row of the import table is a fresh interpreter importing everything the rows above it
import too, so the step column is what that layer adds (CPU: user + system, best of the runs,
the least disturbed by other load). The last row adds the ``acp`` package, which the agent now
imports only for a request outside the plain subset it routes itself (before, every start paid
it). Beside it: the whole CPU of an agent process that starts, answers one ``initialize`` and
exits at end of input — once with a plain request, once with one that needs ``acp``'s router.
Target (benchmarked, never asserted): agent import ≤ 250 ms CPU on the cold path.

Every process runs with a bytecode cache (``PYTHONPYCACHEPREFIX`` in a temp dir) even where the
machine sets ``PYTHONDONTWRITEBYTECODE``, so the numbers measure imports, not compilation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

IMPORT_TARGET_MS = 250.0

_AGENT = "dsh_acp_agent._main, dsh_llm_replay, dsh_persistence_jsonl"
"""What a replayed run on the JSONL store imports before it reads its first request."""

IMPORT_STEPS = [
    ("bare interpreter", "pass"),
    ("+ asyncio", "import asyncio"),
    ("+ pydantic `BaseModel`", "import asyncio; from pydantic import BaseModel"),
    ("+ pydantic-settings", "import asyncio, pydantic_settings"),
    (
        "+ dsh core, replay client, JSONL store, the agent: **the agent as it serves**",
        f"import {_AGENT}",
    ),
    (
        "+ `acp` (its package imports the whole schema): what serving imported before, now only "
        "for a request outside the plain subset",
        f"import {_AGENT}, acp",
    ),
]

_INITIALIZE = """
import json, resource, subprocess, sys
params = json.loads(sys.argv[1])
best = 1e9
for _ in range(int(sys.argv[2])):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    frame = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    done = subprocess.run([sys.executable, "-m", "dsh_acp_agent"], input=json.dumps(frame) + "\\n",
                          capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Exit 3: no prompt came, so the recording loaded at start was (rightly) not consumed.
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["result"]["protocolVersion"] == 1, done.stdout
    best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
print(best)
"""

# A plain initialize, and one whose version is a date string (Zed's legacy form): valid, but
# outside the plain subset, so acp's router (and schema) answers it.
_PLAIN: dict[str, object] = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": True}},
}
_NEEDS_ACP: dict[str, object] = {"protocolVersion": "2024-11-05"}


RECORDING = Path(__file__).resolve().parent.parent / "snapshots/sdk/text-turn/session.jsonl"


def _env(cache: Path, sessions: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {
        "PYTHONPYCACHEPREFIX": str(cache),
        "DSH_SESSIONS_ROOT": str(sessions),
        "DSH_MODEL_CLIENT": "replay",
        "DSH_STORE": "jsonl",
        "DSH_SNAPSHOT_FILE": str(RECORDING),
    }
    return env


def _best_cpu(code: str, env: dict[str, str], runs: int) -> float:
    """CPU seconds (user + system, best of ``runs``) of a fresh ``python -c code``."""
    loop = (
        "import resource, subprocess, sys\n"
        "best = 1e9\n"
        f"for _ in range({runs}):\n"
        "    before = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        f"    subprocess.run([sys.executable, '-c', {code!r}], check=True)\n"
        "    after = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "    best = min(best, after.ru_utime - before.ru_utime + after.ru_stime"
        " - before.ru_stime)\n"
        "print(best)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", loop], env=env, capture_output=True, text=True, check=True
    ).stdout
    return float(out.strip())


def _initialize_cpu(params: dict[str, object], env: dict[str, str], runs: int) -> float:
    """CPU seconds (best of ``runs``) of an agent that answers one ``initialize`` and exits."""
    out = subprocess.run(
        [sys.executable, "-c", _INITIALIZE, json.dumps(params), str(runs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(out.strip().splitlines()[-1])


def run(quick: bool) -> str:
    """Measure the import steps and the served ``initialize``; return the Markdown section."""
    runs = 3 if quick else 9
    with tempfile.TemporaryDirectory(prefix="dsh-bench-startup-") as tmp_name:
        tmp = Path(tmp_name)
        env = _env(tmp / "pycache", tmp / "sessions")
        _best_cpu(f"import {_AGENT}, acp", env, 1)  # fill the bytecode cache
        steps = [(label, _best_cpu(code, env, runs)) for label, code in IMPORT_STEPS]
        plain = _initialize_cpu(_PLAIN, env, runs)
        needs_acp = _initialize_cpu(_NEEDS_ACP, env, runs)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        "## Agent start-up (`bench/bench_startup.py`)\n",
        "A cold `dsh-acp-agent` (replay client, JSONL store): each row imports everything above "
        "it too, in a fresh interpreter; CPU ms (user + system), best of "
        f"{runs} runs. Load average at the end: {load} on {os.cpu_count()} cores.\n",
    ]
    if quick:
        lines.append("**Quick run (smoke test): 3 runs per row.**\n")
    lines += ["| cumulative import | CPU ms | step ms |", "|---|---:|---:|"]
    previous = 0.0
    for label, cpu in steps:
        lines.append(f"| {label} | {cpu * 1000:.0f} | {(cpu - previous) * 1000:+.0f} |")
        previous = cpu
    agent_ms = steps[-2][1] * 1000
    acp_ms = (steps[-1][1] - steps[-2][1]) * 1000
    verdict = "met" if agent_ms <= IMPORT_TARGET_MS else "missed"
    lines += [
        "",
        f"- Agent import on the cold path: **{agent_ms:.0f} ms** CPU (target ≤ "
        f"{IMPORT_TARGET_MS:g} ms: {verdict}); before the agent routed plain requests itself "
        f"it also imported `acp` at start, {acp_ms:.0f} ms more "
        f"({steps[-1][1] * 1000:.0f} ms in all).",
        f"- A whole agent process, start to exit, answering one `initialize` (best of {runs}): "
        f"plain request **{plain * 1000:.0f} ms** CPU; a request outside the plain subset "
        f"(`protocolVersion` as a date string, which `acp`'s router answers) "
        f"{needs_acp * 1000:.0f} ms.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick=True))

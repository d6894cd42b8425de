"""A foreign agent's run in the gate against that agent's own bare run (issue 24, item 2).

*Bare*: the foreign agent of ``snapshots/foreign/acp-example`` (agent-client-protocol's
example agent making one ``openai`` SDK call) started as a plain subprocess, driven through the
scenario's steps, its one model call answered by the scripted model server living in the
measuring process; CPU is the agent's alone (``RUSAGE_CHILDREN`` around each run), so the
anchor is the agent's own start plus its model calls and nothing of ours.

*Gate*: ``dsh-snapshot replay`` over K copies of the scenario (both backends, ``--jobs 2``),
CPU of the whole process tree (gate, proxy, sandbox, every agent). *Per run* divides it all by
the runs (the gate's own start included); *marginal* is the CPU of the K = K2 gate above the
K = 1 gate over the extra runs: what one more foreign run costs. Target: marginal ≤ 1.5x bare.

Every process runs with a bytecode cache (``PYTHONPYCACHEPREFIX``), as in ``bench_scale``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from treecpu import bytecode_env, load_average, tree

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "snapshots" / "foreign" / "acp-example"
TARGET = 1.5

_BARE = """
import json, resource, sys, tempfile
from pathlib import Path
from dsh_scripted_server import ScriptedModelServer, load_script_file
from dsh_snapshot import load_scenario
from dsh_snapshot._agent import ScenarioAgent
scenario = load_scenario(Path(sys.argv[1]))
runs = int(sys.argv[2])
cpu = []
# The agent sends no session header: a router hands out the script's answers in order.
answers = []
with ScriptedModelServer(router=lambda body: (answers.pop(0), None)) as server:
    for _ in range(runs):
        answers[:] = [a for session in load_script_file(scenario.script_file) for a in session]
        tmp = Path(tempfile.mkdtemp())
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "TMPDIR": str(tmp),
               "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "placeholder"}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        command = [sys.executable, str(scenario.path / "agent.py")]
        with ScenarioAgent(tmp, env, 60.0, command=command) as agent:
            for step in scenario.steps:
                agent.run_step(step)
            code = agent.finish()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert code == 0, agent.stderr_tail()
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
print(json.dumps(cpu))
"""


def bare(env: dict[str, str], runs: int) -> list[float]:
    """CPU seconds of each bare run of the foreign agent."""
    out = subprocess.run(
        [sys.executable, "-c", _BARE, str(SCENARIO), str(runs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [float(x) for x in json.loads(out.strip().splitlines()[-1])]


def gate(env: dict[str, str], tmp: Path, k: int) -> tuple[int, float, int]:
    """The gate over ``k`` copies: exit code, CPU seconds of the tree, runs."""
    folder = tmp / f"k{k}"
    for i in range(k):
        shutil.copytree(SCENARIO, folder / f"copy{i:03d}" / "foreign" / SCENARIO.name)
    command = str(Path(sys.executable).with_name("dsh-snapshot"))
    argv = [command, "replay", str(folder), "--jobs", "2", "--store", "jsonl,sqlite"]
    data = tree(argv, env)
    shutil.rmtree(folder)
    return int(data["code"]), float(data["cpu"]), 2 * k


def close_ms(runs: int) -> tuple[float, float]:
    """Wall ms of ``ProxyServer.close()`` after one request (median, fastest): what a proxy
    started and stopped per run paid at its end."""
    import time  # noqa: PLC0415 - only this measurement

    import httpx  # noqa: PLC0415

    from dsh_llm_proxy import ProxyServer  # noqa: PLC0415

    walls: list[float] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-close-") as tmp_name:
        root = Path(tmp_name) / "root"
        root.mkdir()
        for _ in range(runs):
            server = ProxyServer.replay(root).start()
            httpx.get(server.base_url + "/models", trust_env=False)
            started = time.perf_counter()
            server.close()
            walls.append(time.perf_counter() - started)
    return statistics.median(walls) * 1000, min(walls) * 1000


def run(quick: bool) -> str:
    """Measure bare and gated runs, interleaved; return the Markdown section."""
    k2 = 2 if quick else 5
    repeats = 1 if quick else 3
    with tempfile.TemporaryDirectory(prefix="dsh-bench-foreign-") as tmp_name:
        tmp = Path(tmp_name)
        env = bytecode_env(tmp / "pycache")
        bare(env, 1)  # fill the bytecode cache
        bares: list[float] = []
        small: list[tuple[int, float, int]] = []
        large: list[tuple[int, float, int]] = []
        for _ in range(repeats):  # interleaved: the machine's load hits every side alike
            bares += bare(env, 3)
            small.append(gate(env, tmp, 1))
            large.append(gate(env, tmp, k2))
            print(
                f"bench: foreign {small[-1]} {large[-1]} (load {load_average()})", file=sys.stderr
            )
    close_median, close_best = close_ms(5 if quick else 15)
    anchor = statistics.median(bares)
    cpu1 = statistics.median(c for _, c, _ in small)
    cpu2 = statistics.median(c for _, c, _ in large)
    runs1, runs2 = small[0][2], large[0][2]
    codes = sorted({c for c, _, _ in small + large})
    marginal = (cpu2 - cpu1) / (runs2 - runs1)
    verdict = "met" if marginal / anchor <= TARGET else "missed"
    lines = [
        "## A foreign agent's run (`bench/bench_foreign.py`)\n",
        (__doc__ or "").split("\n\n", 1)[1].strip() + "\n",
        f"Medians of {repeats} interleaved repeats (bare: {len(bares)} runs). Load average at "
        f"the end: {load_average()} on {os.cpu_count()} cores (a machine shared with other "
        "engineers: compare the ratios, measured in the same run).\n",
        "| what | runs | CPU s | CPU ms / run | x bare |",
        "|---|---:|---:|---:|---:|",
        f"| bare agent (its start + 1 model call) | 1 | {anchor:.3f} | {anchor * 1000:.0f} "
        "| 1.00x |",
        f"| gate, K = 1 | {runs1} | {cpu1:.2f} | {cpu1 / runs1 * 1000:.0f} "
        f"| {cpu1 / runs1 / anchor:.2f}x |",
        f"| gate, K = {k2} | {runs2} | {cpu2:.2f} | {cpu2 / runs2 * 1000:.0f} "
        f"| {cpu2 / runs2 / anchor:.2f}x |",
        f"| **one more run** (K = {k2} minus K = 1) | | | {marginal * 1000:.0f} "
        f"| **{marginal / anchor:.2f}x** |",
        "",
        f"- Marginal foreign run: {marginal / anchor:.2f}x bare (target ≤ {TARGET:g}x: "
        f"{verdict}); gate exit codes {codes}.",
        f"- `ProxyServer.close()` after one request (wall, median of {5 if quick else 15}): "
        f"{close_median:.1f} ms (fastest {close_best:.1f} ms).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick=True))

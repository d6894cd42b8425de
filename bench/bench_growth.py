"""Cost per model call as a scenario grows (issue #24, item 1): flat, not growing with N.

Two measures over scenarios of N = 1, 10, 100 and 1,000 model calls (N prompts in one
session, each answered by one scripted text reply, so the conversation sent to the model
grows by two messages per call):

- **agent loop**: ``Agent.run_turn`` N times in-process against ``ScriptedModel`` with a real
  JSONL store (fsync per step included), process CPU per call;
- **gate replay**: the scenario recorded keylessly (``dsh-snapshot record --scripted``), then
  ``dsh-snapshot replay --jobs 1 --store jsonl`` in a wrapper that reports the CPU of the
  whole process tree (gate, fork server, agent). *Per call* is the CPU above the 1-call
  scenario's, divided by the N - 1 extra calls, so the fixed start-up does not hide growth.

Target: per-call CPU at N = 1,000 ≤ 1.2x that at N = 10, on both measures. CPU time, not
wall: the machine is shared.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dsh_core import Agent, AgentConfig, CreateOptions, SessionMeta
from dsh_core.testing import ScriptedModel, text_chunks
from dsh_persistence_jsonl import JsonlSessionStore

TARGET = 1.2
SIZES = (1, 10, 100, 1000)


def _reply(text: str) -> dict[str, Any]:
    usage = {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 0, "reasoningTokens": 0}
    chunks: list[Any] = [*text_chunks(text)]
    chunks.insert(-1, {"type": "usage", "usage": usage})
    return {"chunks": chunks}


def scenario(folder: Path, n: int, copy: int = 0) -> Path:
    """A scenario of ``n`` one-call prompts in one session under ``folder/sdk``."""
    target = folder / "sdk" / f"growth-{n}-{copy}"
    target.mkdir(parents=True)
    # Every copy's text is its own: the gate scans each content once (a content-hash cache),
    # so identical copies would hide the scan from all but the first.
    prompts = [
        {"op": "prompt", "text": f"Reply with exactly: R{i}-{copy}. No tools."} for i in range(n)
    ]
    steps = [{"op": "initialize"}, {"op": "newSession"}, *prompts]
    (target / "input.json").write_text(json.dumps({"steps": steps}, indent=1))
    script = {"sessions": [[_reply(f"R{i}-{copy}") for i in range(n)]]}
    (target / "model.script.json").write_text(json.dumps(script, indent=1))
    (target / "snapshot.yml").write_text(
        "version: 1\nprofile: sdk\nstore: default\nrecording: scripted\nloop: june\n"
        f'description: "{n} one-call prompts in one session"\n'
    )
    return target


def loop_cpu(n: int) -> float:
    """CPU seconds of ``n`` turns of the agent loop in this process."""
    with tempfile.TemporaryDirectory(prefix="dsh-bench-growth-") as tmp:
        store = JsonlSessionStore(Path(tmp) / "sessions")
        model = ScriptedModel([[text_chunks(f"R{i}") for i in range(n)]])
        agent = Agent(model, store, [], AgentConfig(profile="june"))
        session = store.create(CreateOptions(meta=SessionMeta(cwd=tmp)))

        async def turns() -> None:
            for i in range(n):
                await agent.run_turn(session, f"Reply with exactly: R{i}. No tools.")

        started = time.process_time()
        asyncio.run(turns())
        cpu = time.process_time() - started
        session.close()
        store.close()
        model.assert_consumed()
        return cpu


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def gate_cpu(gate: str, folder: Path, env: dict[str, str]) -> float:
    """CPU seconds of the whole process tree of one replay of the scenario in ``folder``
    (the gate is reaped here, and it reaped its fork server and agents: all counted)."""
    argv = [gate, "replay", str(folder), "--jobs", "1", "--store", "jsonl"]
    before = _children_cpu()
    code = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=False).returncode
    if code != 0:
        raise RuntimeError(f"dsh-snapshot replay failed on {folder} (exit {code})")
    return _children_cpu() - before


def run(quick: bool) -> str:
    """Measure both per-call costs at every size; return the Markdown section."""
    sizes = SIZES[:3] if quick else SIZES
    runs = 1 if quick else 3
    gate = str(Path(sys.executable).with_name("dsh-snapshot"))
    loop: dict[int, float] = {}
    per_call: dict[int, float] = {}
    replay: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-growth-") as tmp_name:
        tmp = Path(tmp_name)
        # A bytecode cache even where the machine sets PYTHONDONTWRITEBYTECODE: without one
        # every interpreter recompiles what it imports, which measures the machine.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        # Each size runs as K copies beside K copies of the 1-call scenario (the base), so
        # both gates pay the same per-run start-up and the difference is ≥ ~200 extra calls:
        # well above the noise of one gate's start on a loaded machine.
        copies = {n: max(1, (20 if quick else 200) // n) for n in sizes if n > 1}
        folders: dict[int, tuple[Path, Path]] = {}
        for n, k in copies.items():
            folders[n] = (tmp / f"n{n}", tmp / f"base{n}")
            for i in range(k):
                scenario(folders[n][0], n, i)
                scenario(folders[n][1], 1, i)
            for folder in folders[n]:
                subprocess.run(
                    [gate, "record", "--scripted", str(folder), "--jobs", "1"],
                    env=env,
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
        samples: dict[int, list[float]] = {n: [] for n in copies}
        base_samples: dict[int, list[float]] = {n: [] for n in copies}
        loop_samples: dict[int, list[float]] = {n: [] for n in sizes}
        for _ in range(runs):  # interleaved: load on the machine hits every size alike
            for n in sizes:
                loop_samples[n].append(loop_cpu(n))
                if n in copies:
                    samples[n].append(gate_cpu(gate, folders[n][0], env))
                    base_samples[n].append(gate_cpu(gate, folders[n][1], env))
        for n in sizes:
            loop[n] = statistics.median(loop_samples[n])
        for n, k in copies.items():
            replay[n] = statistics.median(samples[n])
            extra = replay[n] - statistics.median(base_samples[n])
            per_call[n] = extra / (k * (n - 1))
    loop_per_call = {n: loop[n] / n for n in sizes}
    largest = sizes[-1]
    replay_ratio = per_call[largest] / per_call[10]
    loop_ratio = loop_per_call[largest] / loop_per_call[10]
    rows = [
        f"| {n:,} | {loop_per_call[n] * 1e3:.2f} | "
        + (f"{copies[n]} | {replay[n]:.2f} | {per_call[n] * 1e3:.2f} |" if n in copies else "| | |")
        for n in sizes
    ]

    def verdict(ratio: float) -> str:
        if ratio <= 0:  # the smaller size's extra calls were lost in the machine's noise
            return "not measurable in this run"
        return "met" if ratio <= TARGET else "missed"

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return "\n".join(
        [
            "## Cost per model call as a scenario grows (`bench/bench_growth.py`)",
            "",
            "N one-call prompts in one session (the conversation grows two messages per call). "
            "*Agent loop*: `Agent.run_turn` N times in-process (ScriptedModel, JSONL store), "
            "CPU per call. *Gate replay*: `dsh-snapshot replay --jobs 1 --store jsonl` "
            "of K copies of the keylessly recorded scenario, CPU of the whole process tree; its "
            "*per call* is the CPU above that of K copies of the 1-call scenario (same runs, "
            "same start-up) over the K·(N - 1) extra calls. Medians of "
            f"{runs} interleaved runs. Target: per call at N = {largest:,} ≤ {TARGET}x per "
            f"call at N = 10. **Shared, loaded machine** (load average {load} on "
            f"{os.cpu_count()} cores): CPU times, not wall.",
            "",
            "| N calls | agent loop ms CPU / call | K copies | gate replay CPU s "
            "| gate ms CPU / extra call |",
            "|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"- Agent loop: N = {largest:,} / N = 10 per call = **{loop_ratio:.2f}x** "
            f"(target ≤ {TARGET}x: {verdict(loop_ratio)}).",
            f"- Gate replay: N = {largest:,} / N = 10 per extra call = **{replay_ratio:.2f}x** "
            f"(target ≤ {TARGET}x: {verdict(replay_ratio)})"
            + (" (quick run: N ≤ 100, one run)" if quick else "")
            + ".",
            "",
        ]
    )


if __name__ == "__main__":
    print(run(quick=True))

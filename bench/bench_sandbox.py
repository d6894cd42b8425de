"""What the bubblewrap sandbox costs a ``bash`` command and a run (issue #20).

A ``bash`` tool call of ``true`` through :class:`dsh_core.BashTool`, unconfined
(``DSH_SANDBOX=off``: the allow-listed environment only) and sandboxed (bubblewrap, the
seccomp filter and the in-sandbox supervisor: perl's, the default where perl exists, and the
Python one it replaced), interleaved, wall-clock median of the runs; then what a run pays
once: the probe (one bubblewrap start, cached per process) and the seccomp filter (built once
by libseccomp).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from dsh_core import BashTool, SandboxMechanisms, SandboxSettings, ToolSandbox
from dsh_core._sandbox import (  # pyright: ignore[reportPrivateUsage]
    Supervisor,  # pyright: ignore[reportPrivateUsage]
    _perl,
    _probe,
)
from dsh_core._seccomp import seccomp_program
from dsh_core.testing import tool_context


async def _timed(tool: BashTool, cwd: Path) -> float:
    start = time.perf_counter()
    outcome = await tool.run({"command": "true", "description": "b"}, tool_context(cwd, [tool]))
    elapsed = time.perf_counter() - start
    if outcome.text != "(no output)":
        raise RuntimeError(f"the benchmark command failed: {outcome.text}")
    return elapsed


async def _commands(runs: int, cwd: Path) -> dict[str, list[float]]:
    def strict(supervisor: Supervisor) -> BashTool:
        settings = SandboxSettings(sandbox="strict", sandbox_network="deny")
        return BashTool(sandbox=ToolSandbox(settings, supervisor=supervisor))

    tools = {"off": BashTool(sandbox=ToolSandbox(SandboxSettings(sandbox="off")))}
    tools["python"] = strict("python")
    if _perl() is not None:
        tools["perl"] = strict("perl")
    for tool in tools.values():
        await _timed(tool, cwd)  # warm-up: page cache, the probe
    times: dict[str, list[float]] = {name: [] for name in tools}
    for _ in range(runs):
        for name, tool in tools.items():
            times[name].append(await _timed(tool, cwd))
    return times


def run(quick: bool) -> str:
    """One Markdown section: per command, then per run."""
    runs = 5 if quick else 30
    mechanisms = SandboxMechanisms.probe()
    if mechanisms.missing:
        return f"## Sandbox (`bench/bench_sandbox.py`)\n\nNot measured: {mechanisms.missing}\n"
    _probe.cache_clear()
    start = time.perf_counter()
    _probe()
    probe_s = time.perf_counter() - start
    seccomp_program.cache_clear()
    start = time.perf_counter()
    seccomp_program()
    seccomp_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="dsh-bench-sandbox-") as scratch:
        times = asyncio.run(_commands(runs, Path(scratch)))
    ms = {name: statistics.median(values) * 1000 for name, values in times.items()}
    rows = [f"| `bash -c true`, unconfined (`DSH_SANDBOX=off`) | {ms['off']:.1f} | {runs} |"]
    labels = {"python": "Python supervisor (before)", "perl": "perl supervisor (now)"}
    for name in ("python", "perl"):
        if name in ms:
            rows.append(f"| `bash -c true`, sandboxed, {labels[name]} | {ms[name]:.1f} | {runs} |")
            rows.append(
                f"| **cost per command**, {labels[name]} | **{ms[name] - ms['off']:.1f}** | |"
            )
    return "\n".join(
        [
            "## Sandbox (`bench/bench_sandbox.py`)",
            "",
            (__doc__ or "").split("\n\n", 1)[1].strip(),
            "",
            "| what | median ms | runs |",
            "|---|---:|---:|",
            *rows,
            f"| once per run: the probe (one bubblewrap start) | {probe_s * 1000:.1f} | 1 |",
            f"| once per run: the seccomp filter (libseccomp) | {seccomp_s * 1000:.1f} | 1 |",
            "",
        ]
    )

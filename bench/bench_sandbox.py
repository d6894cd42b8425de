"""What the bubblewrap sandbox costs a ``bash`` command and a run (issue #20).

A ``bash`` tool call of ``true`` through :class:`dsh_core.BashTool`, unconfined
(``DSH_SANDBOX=off``: the allow-listed environment only) and sandboxed (bubblewrap, the
seccomp filter and the in-sandbox supervisor), interleaved, wall-clock median of the runs; then
what a run pays once: the probe (one bubblewrap start, cached per process) and the seccomp
filter (built once by libseccomp).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from dsh_core import BashTool, SandboxMechanisms, SandboxSettings, ToolSandbox
from dsh_core._sandbox import _probe  # pyright: ignore[reportPrivateUsage]
from dsh_core._seccomp import seccomp_program
from dsh_core.testing import tool_context


async def _timed(tool: BashTool, cwd: Path) -> float:
    start = time.perf_counter()
    outcome = await tool.run({"command": "true", "description": "b"}, tool_context(cwd, [tool]))
    elapsed = time.perf_counter() - start
    if outcome.text != "(no output)":
        raise RuntimeError(f"the benchmark command failed: {outcome.text}")
    return elapsed


async def _commands(runs: int, cwd: Path) -> tuple[list[float], list[float]]:
    off = BashTool(sandbox=ToolSandbox(SandboxSettings(sandbox="off")))
    strict = BashTool(
        sandbox=ToolSandbox(SandboxSettings(sandbox="strict", sandbox_network="deny"))
    )
    await _timed(off, cwd)  # warm-up: page cache, the probe
    await _timed(strict, cwd)
    plain: list[float] = []
    boxed: list[float] = []
    for _ in range(runs):
        plain.append(await _timed(off, cwd))
        boxed.append(await _timed(strict, cwd))
    return plain, boxed


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
        plain, boxed = asyncio.run(_commands(runs, Path(scratch)))
    off_ms = statistics.median(plain) * 1000
    on_ms = statistics.median(boxed) * 1000
    return "\n".join(
        [
            "## Sandbox (`bench/bench_sandbox.py`)",
            "",
            (__doc__ or "").split("\n\n", 1)[1].strip(),
            "",
            "| what | median ms | runs |",
            "|---|---:|---:|",
            f"| `bash -c true`, unconfined (`DSH_SANDBOX=off`) | {off_ms:.1f} | {runs} |",
            f"| `bash -c true`, sandboxed (strict, no network) | {on_ms:.1f} | {runs} |",
            f"| **cost per command** | **{on_ms - off_ms:.1f}** | |",
            f"| once per run: the probe (one bubblewrap start) | {probe_s * 1000:.1f} | 1 |",
            f"| once per run: the seccomp filter (libseccomp) | {seccomp_s * 1000:.1f} | 1 |",
            "",
        ]
    )

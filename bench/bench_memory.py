"""Peak memory loading a 1M-event session (issue 24, item 5): JSONL and SQLite stores.

Each store gets one session of N events (whole synthetic turns, written as the session's seed:
one durable commit, so making a 1M-event log takes seconds, not the hours of one fsync per
turn). A fresh interpreter then opens the store and loads the session once; beside the file
size it reports the ``tracemalloc`` peak during the load (Python allocations) and the growth
of the process's peak RSS over its RSS just before the load (everything: the SQLite page
cache, allocator slack and freed temporaries included). Target: peak < 3.5x the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET = 3.5

_MAKE = """
import sys
from pathlib import Path
from dsh_core import CreateOptions, SessionMeta
from dsh_core.plugins import store_backend
from dsh_core.testing import synthetic_turn
kind, root, target = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
events, turn = [], 1
while len(events) < target:
    events += synthetic_turn(len(events), turn)
    turn += 1
store = store_backend(kind).open(root)
meta = SessionMeta(created_at=1_780_000_000_000)
store.create(CreateOptions(session_id="bench-memory", seed=events, meta=meta)).close()
store.close()
print(len(events))
"""

_LOAD = """
import gc, json, resource, sys, tracemalloc
from pathlib import Path
from dsh_core.plugins import store_backend
kind, root, traced = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1"
store = store_backend(kind).open(root)
gc.collect()
def rss_kib():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmRSS:"))
before = rss_kib()
if traced:
    tracemalloc.start()
log = store.load("bench-memory")
peak = tracemalloc.get_traced_memory()[1] if traced else 0
maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"events": len(log.events), "traced": peak,
                  "rss_growth": (maxrss - before) * 1024}))
"""


def _python(code: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True
    ).stdout
    return out.strip().splitlines()[-1]


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def run(quick: bool) -> str:
    """Make each store's log, load it in fresh interpreters; return the Markdown section."""
    target = 20_000 if quick else 1_000_000
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-memory-") as tmp_name:
        for kind in ("jsonl", "sqlite"):
            root = Path(tmp_name) / kind
            events = int(_python(_MAKE, kind, str(root), str(target)))
            size = _size(root)
            traced = json.loads(_python(_LOAD, kind, str(root), "1"))
            plain = json.loads(_python(_LOAD, kind, str(root), "0"))
            assert traced["events"] == plain["events"] == events
            t_ratio, r_ratio = traced["traced"] / size, plain["rss_growth"] / size
            verdict = "met" if max(t_ratio, r_ratio) < TARGET else "missed"
            rows.append(
                f"| {kind} | {events:,} | {size / 2**20:.1f} MiB | "
                f"{traced['traced'] / 2**20:.1f} MiB | **{t_ratio:.2f}x** | "
                f"{plain['rss_growth'] / 2**20:.1f} MiB | **{r_ratio:.2f}x** | {verdict} |"
            )
            print(f"bench: memory {kind}: {rows[-1]}", file=sys.stderr)
    lines = [
        "## Peak memory loading a long session (`bench/bench_memory.py`)\n",
        (__doc__ or "").split("\n\n", 1)[1].strip() + "\n",
    ]
    if quick:
        lines.append("**Quick run (smoke test): 20,000 events only.**\n")
    lines += [
        "| store | events | file(s) | tracemalloc peak | / file | RSS growth | / file | "
        f"< {TARGET:g}x |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
        *rows,
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick=True))

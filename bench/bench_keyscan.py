"""The key scan on crafted input and on a committed scenario (issues #20 and #24).

Each crafted file is one 375 KiB line of a filler that made a detect-secrets pattern backtrack
from every start position (before: 117 s for ``-sk…``); the scan must stay linear, so the
table also shows the same filler at twice the size. The committed-scenario rows show the
content-hash cache: the first scan of ``snapshots/sdk`` in a process, then the same folders
again (what every further store backend and run of the gate pays). CPU seconds of this
process, best of the runs.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from dsh_snapshot import scan_file, scan_folder
from dsh_snapshot._detect import detectors
from dsh_snapshot._scancache import clear

ROOT = Path(__file__).resolve().parent.parent
FILLERS = ["-sk", "password", "secret_", "password=`a ", "eyJa", '"a" == password ', "%25"]


def _cpu(action: object, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        clear()
        start = time.process_time()
        action()  # type: ignore[operator]
        best = min(best, time.process_time() - start)
    return best


def run(quick: bool) -> str:
    """One Markdown section: crafted lines at 1x and 2x, then the cache on snapshots/sdk."""
    detectors()
    size = 64 * 1024 if quick else 375 * 1024
    runs = 1 if quick else 3
    lines = [
        "## Key scan: crafted input and the content cache (`bench/bench_keyscan.py`)",
        "",
        f"One line of each filler, {size // 1024} KiB and twice that; CPU s, best of {runs}.",
        "",
        "| filler | 1x | 2x | 2x / 1x |",
        "|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for filler in FILLERS:
            times: list[float] = []
            for factor in (1, 2):
                path = Path(tmp) / "crafted.txt"
                path.write_text(filler * (factor * size // len(filler)), encoding="utf-8")
                times.append(_cpu(lambda p=path: scan_file(p), runs))
            shown = filler.replace("|", "\\|").replace("`", "\\`")
            lines.append(
                f"| `{shown}` | {times[0]:.2f} | {times[1]:.2f} | {times[1] / times[0]:.2f} |"
            )
    folders = sorted(p for p in (ROOT / "snapshots" / "sdk").iterdir() if p.is_dir())
    if quick:
        folders = folders[:2]

    def scan_all() -> None:
        for folder in folders:
            scan_folder(folder)

    cold = _cpu(scan_all, runs)
    clear()
    scan_all()
    start = time.process_time()
    scan_all()
    warm = time.process_time() - start
    lines += [
        "",
        f"`snapshots/sdk` ({len(folders)} scenarios): first scan {cold:.3f} s, "
        f"the same contents again {warm:.3f} s ({warm / cold:.2%}).",
    ]
    return "\n".join(lines)

"""``bench/run.py --only NAME`` replaces that benchmark's section of BENCHMARKS.md only."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _run_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REPORT = """# Benchmarks

- Date: then

## Persistence (`bench/bench_persistence.py`)

old numbers

- old note

## Other (`bench/bench_other.py`)

kept
"""


def test_only_replaces_the_named_section_and_keeps_the_others() -> None:
    run = _run_module()
    new = "## Persistence (`bench/bench_persistence.py`), renamed\n\nnew numbers\n"
    out = run.replace_sections(REPORT, {"persistence": new})
    assert out == REPORT.replace(
        "## Persistence (`bench/bench_persistence.py`)\n\nold numbers\n\n- old note\n",
        "## Persistence (`bench/bench_persistence.py`), renamed\n\nnew numbers\n",
    )


def test_only_appends_a_section_the_report_lacks_and_replaces_the_last_one() -> None:
    run = _run_module()
    out = run.replace_sections(REPORT, {"memory": "## Memory (`bench/bench_memory.py`)\n\nm\n"})
    assert out == REPORT + "\n## Memory (`bench/bench_memory.py`)\n\nm\n"
    last = run.replace_sections(REPORT, {"other": "## Other (`bench/bench_other.py`)\n\nnew\n"})
    assert last == REPORT.replace("kept\n", "new\n")

"""Persistence benchmark (issue #2 item 7, #11): append throughput, load time and load memory.

For each backend a ~100,000-event session is appended one turn-sized batch at a time (each
batch one durable commit: fsync on), then loaded several times. Beside the load time stands
the floor: plain ``json.loads`` of every line of the same log's JSONL bytes (decode, split,
parse), the least any loader of this format must do. Targets: load within 3x the floor, and
the ``tracemalloc`` peak while loading under 4x the file size.

The append anchor (issue #11): OpenAI Agents' ``SQLiteSession.add_items`` (WAL, its default
``synchronous``, one commit per call) appending the same events, as JSON objects, one batch per
call, timed in the same run. Target: each backend appends at least 2x as many events per second.
"""

from __future__ import annotations

import gc
import importlib
import json
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_core import CreateOptions, Event, SessionMeta, SessionStore
from dsh_core.testing import synthetic_turn

SESSION_ID = "bench-session"
LOAD_TARGET = 3.0
MEMORY_TARGET = 4.0
APPEND_TARGET = 2.0
MIN_BATCH = 40  # synthetic turns are 12-33 events; group them into realistic 40-65 event turns


@dataclass(frozen=True, slots=True)
class Backend:
    """How to open one store kind under a temporary directory and find its bytes."""

    name: str
    open: Callable[[Path], SessionStore]
    files: Callable[[Path], list[Path]]
    jsonl_text: Callable[[SessionStore, Path], str]


def anchor_events_per_second(plan: list[list[Event]]) -> float:
    """``SQLiteSession.add_items`` of the same batches (as JSON objects) into a file: events/s."""
    import asyncio  # noqa: PLC0415 - the anchor's API is async

    from agents.memory import SQLiteSession  # noqa: PLC0415 - bench group only

    items: list[list[Any]] = [[event.to_json() for event in batch] for batch in plan]

    async def append(path: Path) -> float:
        session = SQLiteSession(SESSION_ID, path)
        try:
            started = time.perf_counter()
            for batch in items:
                await session.add_items(batch)
            return time.perf_counter() - started
        finally:
            session.close()

    with tempfile.TemporaryDirectory(prefix="dsh-bench-anchor-") as tmp_name:
        seconds = asyncio.run(append(Path(tmp_name) / "anchor.sqlite3"))
    return sum(len(batch) for batch in plan) / seconds


@dataclass(slots=True)
class Result:
    backend: str
    events: int
    batches: int
    append_s: float
    load_s: float
    load_runs: int
    floor_s: float
    best_ratio: float
    jsonl_bytes: int
    store_bytes: int
    peak_bytes: int
    same_text_as: str = ""


def batches(target: int) -> list[list[Event]]:
    """Whole synthetic turns, grouped into batches of at least ``MIN_BATCH`` events."""
    out: list[list[Event]] = []
    seq, turn = 0, 1
    while seq < target:
        batch: list[Event] = []
        while len(batch) < MIN_BATCH:
            batch.extend(synthetic_turn(seq + len(batch), turn))
            turn += 1
        out.append(batch)
        seq += len(batch)
    return out


def _sqlite_backend() -> Backend | None:
    try:
        module = importlib.import_module("dsh_persistence_sqlite")
    except ImportError:
        return None
    store_class: Any = module.SqliteSessionStore

    def export(store: SessionStore, _tmp: Path) -> str:
        export_jsonl: Callable[[str], str] = getattr(store, "export_jsonl")  # noqa: B009
        return export_jsonl(SESSION_ID)

    return Backend(
        "SQLite",
        lambda tmp: store_class(tmp / "bench.sqlite3"),
        lambda tmp: [tmp / "bench.sqlite3"],
        export,
    )


def _jsonl_backend() -> Backend | None:
    try:
        module = importlib.import_module("dsh_persistence_jsonl")
    except ImportError:
        return None
    store_class: Any = getattr(module, "JsonlSessionStore", None)
    if store_class is None:  # the package exists before its store does
        return None
    return Backend(
        "JSONL",
        lambda tmp: store_class(tmp / "sessions"),
        lambda tmp: sorted((tmp / "sessions").glob("*.jsonl")),
        lambda _store, tmp: (tmp / "sessions" / f"{SESSION_ID}.jsonl").read_text("utf-8"),
    )


def _timed(action: Callable[[], object]) -> float:
    gc.collect()  # garbage of the previous run is not charged to this one
    started = time.perf_counter()
    result = action()
    elapsed = time.perf_counter() - started
    del result
    return elapsed


def floor_parse(data: bytes) -> list[Any]:
    """The floor: decode the JSONL bytes, split the lines, ``json.loads`` each one."""
    loads = json.loads
    return [loads(line) for line in data.decode("utf-8").split("\n") if line]


def measure(backend: Backend, plan: list[list[Event]], runs: int) -> tuple[Result, str]:
    """Append ``plan`` durably, then time and trace loads. Returns the result and the log text."""
    total = sum(len(batch) for batch in plan)
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp_name:
        tmp = Path(tmp_name)
        store = backend.open(tmp)
        session = store.create(
            CreateOptions(session_id=SESSION_ID, meta=SessionMeta(created_at=1_780_000_000_000))
        )
        started = time.perf_counter()
        for batch in plan:
            for event in batch:
                session.add(event)
            session.flush()
        append_s = time.perf_counter() - started
        session.close()
        text = backend.jsonl_text(store, tmp)
        store.close()

        reader = backend.open(tmp)
        try:
            check = reader.load(SESSION_ID)
            if len(check.events) != total:
                raise AssertionError(f"{backend.name}: loaded {len(check.events)} of {total}")
            del check
            data = text.encode("utf-8")
            # interleaved, so load on the shared machine hits both series alike
            load_times: list[float] = []
            floor_times: list[float] = []
            for _ in range(runs):
                load_times.append(_timed(lambda: reader.load(SESSION_ID)))
                floor_times.append(_timed(lambda: floor_parse(data)))
            gc.collect()
            tracemalloc.start()
            tracemalloc.reset_peak()
            log = reader.load(SESSION_ID)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            del log
        finally:
            reader.close()
        store_bytes = sum(p.stat().st_size for p in backend.files(tmp))
    result = Result(
        backend.name,
        total,
        len(plan),
        append_s,
        statistics.median(load_times),
        runs,
        statistics.median(floor_times),
        min(load_times) / min(floor_times),
        len(data),
        store_bytes,
        peak,
    )
    return result, text


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def render(results: list[Result], missing: list[str], quick: bool, anchor: float | None) -> str:
    """The Markdown section."""
    lines = [
        "## Persistence (`bench/bench_persistence.py`)\n",
        f"One session of ~{results[0].events if results else 0:,} events (whole synthetic turns "
        f"in batches of {MIN_BATCH}-65 events, one durable commit each: fsync on), then "
        "loaded with a fresh store instance. Load time is the median of the runs; the floor "
        "is `json.loads` of every line of the same log's JSONL bytes (decode + split + "
        "parse), timed interleaved with the loads; *best* is the ratio of the fastest load "
        "to the fastest floor run, a check on noise from other load on the machine. Memory "
        "is the `tracemalloc` peak during one load (Python allocations; SQLite's own page "
        f"cache is not traced). Targets: load ≤ {LOAD_TARGET:g}x floor, peak < "
        f"{MEMORY_TARGET:g}x file size.\n",
    ]
    if quick:
        lines.append("**Quick run (smoke test): small session, numbers not representative.**\n")
    lines += [
        "| backend | events | batches | append events/s | load s (median) | floor s | "
        "load / floor | best | load target | file size | peak memory | peak / file | "
        "memory target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    for r in results:
        ratio = r.load_s / r.floor_s
        sizes = [("store file", r.store_bytes)]
        if r.backend != "JSONL":
            sizes.append(("JSONL text", r.jsonl_bytes))
        for index, (label, size) in enumerate(sizes):
            mem_ratio = r.peak_bytes / size
            head = (
                f"| {r.backend} | {r.events:,} | {r.batches:,} | {r.events / r.append_s:,.0f} "
                f"| {r.load_s:.3f} | {r.floor_s:.3f} | **{ratio:.2f}x** | {r.best_ratio:.2f}x | "
                f"{_verdict(ratio <= LOAD_TARGET)} "
                if index == 0
                else "| ″ | | | | | | | | "
            )
            lines.append(
                f"{head}| {_mib(size)} ({label}) | {_mib(r.peak_bytes)} | {mem_ratio:.2f}x | "
                f"{_verdict(mem_ratio < MEMORY_TARGET)} |"
            )
    lines.append("")
    if anchor is None:
        lines.append("- Append anchor: not measured (`openai-agents` is not installed here).")
    else:
        lines.append(
            f"- Append anchor, same batches in the same run: OpenAI Agents' "
            f"`SQLiteSession.add_items` (one call per batch, WAL) **{anchor:,.0f} events/s**."
        )
        for r in results:
            ratio = r.events / r.append_s / anchor
            lines.append(
                f"- {r.backend} appends **{ratio:.2f}x** the anchor's events/s "
                f"(target ≥ {APPEND_TARGET:g}x: {'met' if ratio >= APPEND_TARGET else 'missed'})."
            )
    for r in results:
        lines.append(
            f"- {r.backend}: {r.jsonl_bytes / r.events:.0f} B of JSON per event; "
            f"{r.peak_bytes / r.events:.0f} B of Python allocations per event at the peak."
        )
    for r in results:
        if r.same_text_as:
            lines.append(
                f"- {r.backend}'s `export_jsonl` text is byte-identical to the {r.same_text_as} "
                "file of the same batches."
            )
    for name in missing:
        lines.append(f"- {name}: not measured (the store is not available in this environment).")
    return "\n".join(lines) + "\n"


def run(quick: bool) -> str:
    """Measure every available backend; return the Markdown section."""
    plan = batches(5_000 if quick else 100_000)
    runs = 3 if quick else 7
    results: list[Result] = []
    texts: dict[str, str] = {}
    missing: list[str] = []
    for name, factory in (("JSONL", _jsonl_backend), ("SQLite", _sqlite_backend)):
        backend = factory()
        if backend is None:
            missing.append(name)
            continue
        result, texts[name] = measure(backend, plan, runs)
        results.append(result)
    if "JSONL" in texts and "SQLite" in texts:
        if texts["JSONL"] != texts["SQLite"]:
            raise AssertionError("the SQLite export differs from the JSONL file of the same log")
        for result in results:
            if result.backend == "SQLite":
                result.same_text_as = "JSONL"
    try:
        anchor: float | None = anchor_events_per_second(plan)
    except ImportError:
        anchor = None
    return render(results, missing, quick, anchor)


if __name__ == "__main__":
    print(run(quick=True))

"""Persistence benchmark (issue #2 item 7, #11): append throughput, load time and load memory.

For each backend a ~100,000-event session is appended one whole turn per batch (each batch
one durable commit: fsync on), then loaded several times. Beside the load time stands
the floor: plain ``json.loads`` of every line of the same log's JSONL bytes (decode, split,
parse), the least any loader of this format must do. Targets: load within 3x the floor, and
the ``tracemalloc`` peak while loading under 4x the file size.

The append anchor (issue #11): OpenAI Agents' ``SQLiteSession.add_items`` (WAL, its default
``synchronous``, one commit per call) appending the same events, as JSON objects, one batch per
call. Target: each backend appends at least 2x as many events per second. The sides append
interleaved, batch by batch in rotating order, so the shared disk's varying fsync latency hits
them alike. Wall time is split into user CPU (Python and the SQLite library: the overhead a
store controls) and the rest (the kernel writing and flushing, and waiting for the disk: the
price of the durable commit). The anchor's durability is read from its connection
(``PRAGMA synchronous``), not assumed, and every side's flush calls per batch are counted with
strace (``appendprobe``). The ratio is the median over rounds of the batches; the same
appends on tmpfs show each side's own cost without the disk.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import resource
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appendprobe import (
    Anchor,
    AppendRun,
    AppendTime,
    Ratio,
    append_lines,
    flushes_per_batch,
    median_ratios,
    tmpfs_root,
)

from dsh_core import (
    CreateOptions,
    Event,
    Session,
    SessionMeta,
    SessionStore,
    dumps_event_lines,
)
from dsh_core.testing import synthetic_turn

SESSION_ID = "bench-session"
LOAD_TARGET = 3.0
MEMORY_TARGET = 4.0


@dataclass(frozen=True, slots=True)
class Backend:
    """How to open one store kind under a temporary directory and find its bytes."""

    name: str
    open: Callable[[Path], SessionStore]
    files: Callable[[Path], list[Path]]
    jsonl_text: Callable[[SessionStore, Path], str]
    commit: str
    """How one batch is made durable, as the report states it."""


class _AnchorSide:
    """OpenAI Agents' ``SQLiteSession`` appending the same batches, as JSON objects."""

    def __init__(self, path: Path, plan: list[list[Event]]) -> None:
        import asyncio  # noqa: PLC0415 - the anchor's API is async

        from agents.memory import SQLiteSession  # noqa: PLC0415 - bench group only

        self._loop = asyncio.new_event_loop()
        self._session = SQLiteSession(SESSION_ID, path)
        self._items: list[list[Any]] = [[event.to_json() for event in batch] for batch in plan]

    def append(self, index: int) -> None:
        self._loop.run_until_complete(self._session.add_items(self._items[index]))

    def durability(self) -> tuple[str, int]:
        """``journal_mode`` and ``synchronous`` of the connection that did the writing."""
        connection = self._session._get_connection()  # pyright: ignore[reportPrivateUsage]
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
        return str(mode), int(connection.execute("PRAGMA synchronous").fetchone()[0])

    def close(self) -> None:
        self._session.close()
        self._loop.close()


class _FloorSide:
    """No store at all: one ``write`` + ``fsync`` per batch of bytes encoded beforehand.

    The disk's price of one durable commit per batch at the time of the run: no store that
    flushes each batch can append faster, so its ratio to the anchor is the most any side
    could show in this run.
    """

    def __init__(self, path: Path, plan: list[list[Event]]) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self._data = [dumps_event_lines(batch) for batch in plan]

    def append(self, index: int) -> None:
        os.write(self._fd, self._data[index])
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


@dataclass(slots=True)
class Result:
    backend: str
    events: int
    batches: int
    append: AppendTime
    load_s: float
    load_runs: int
    floor_s: float
    best_ratio: float
    jsonl_bytes: int
    store_bytes: int
    peak_bytes: int
    same_text_as: str = ""


def batches(target: int) -> list[list[Event]]:
    """Whole synthetic turns, one batch per turn, until ``target`` events."""
    out: list[list[Event]] = []
    seq, turn = 0, 1
    while seq < target:
        batch = synthetic_turn(seq, turn)
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
        "WAL, `synchronous=FULL`: one `BEGIN IMMEDIATE`…`COMMIT`, the WAL fdatasynced",
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
        "one `write` of the batch's lines, then `fsync`",
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


def _user_cpu() -> float:
    """User CPU seconds of the whole process (the anchor's worker thread included)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


def _appender(session: Session, plan: list[list[Event]]) -> Callable[[int], None]:
    """Append batch ``index`` of ``plan`` to ``session`` as one durable batch."""

    def append(index: int) -> None:
        for event in plan[index]:
            session.add(event)
        session.flush()

    return append


def append_interleaved(
    backends: list[Backend], root: Path, plan: list[list[Event]], rounds: int = 1
) -> tuple[dict[str, AppendTime], Anchor | None, list[dict[str, AppendTime]]]:
    """Append ``plan`` to every backend (under ``root/<name>``) and to the anchor, batch by
    batch in rotating order, each batch one durable commit. Returns each side's cost, the
    anchor's, and each side's cost (anchor included) in each of ``rounds`` consecutive
    slices of the plan."""
    sides: list[tuple[str, Callable[[int], None]]] = []
    sessions: list[Session] = []
    stores: list[SessionStore] = []
    for backend in backends:
        store = backend.open(root / backend.name)
        session = store.create(
            CreateOptions(session_id=SESSION_ID, meta=SessionMeta(created_at=1_780_000_000_000))
        )
        stores.append(store)
        sessions.append(session)

        sides.append((backend.name, _appender(session, plan)))
    try:
        anchor: _AnchorSide | None = _AnchorSide(root / "anchor.sqlite3", plan)
    except ImportError:
        anchor = None
    if anchor is not None:
        sides.append(("anchor", anchor.append))
    floor = _FloorSide(root / "floor.jsonl", plan)
    sides.append(("floor", floor.append))
    costs = {name: AppendTime() for name, _ in sides}
    per_round = [{name: AppendTime() for name, _ in sides} for _ in range(rounds)]
    try:
        for index in range(len(plan)):
            shift = index % len(sides)
            slice_costs = per_round[index * rounds // len(plan)]
            for name, append in sides[shift:] + sides[:shift]:
                wall, user = time.perf_counter(), _user_cpu()
                append(index)
                user = _user_cpu() - user
                wall = time.perf_counter() - wall
                for cost in (costs[name], slice_costs[name]):
                    cost.user_s += user
                    cost.wall_s += wall
        durability = anchor.durability() if anchor is not None else None
    finally:
        for session in sessions:
            session.close()
        for store in stores:
            store.close()
        if anchor is not None:
            anchor.close()
        floor.close()
    anchor_cost = costs.pop("anchor", None)
    if anchor_cost is None or durability is None:
        return costs, None, per_round
    return costs, Anchor(anchor_cost, *durability), per_round


def measure(
    backend: Backend, tmp: Path, plan: list[list[Event]], append: AppendTime, runs: int
) -> tuple[Result, str]:
    """Time and trace loads of the log :func:`append_interleaved` wrote under ``tmp``.
    Returns the result and the log text."""
    total = sum(len(batch) for batch in plan)
    store = backend.open(tmp)
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
        append,
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


def render(
    results: list[Result],
    commits: dict[str, str],
    missing: list[str],
    quick: bool,
    run: AppendRun,
) -> str:
    """The Markdown section."""
    lines = [
        "## Persistence (`bench/bench_persistence.py`)\n",
        f"One session of ~{results[0].events if results else 0:,} events (whole synthetic turns, "
        "one turn per batch, one durable commit each: fsync on), then "
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
                f"| {r.backend} | {r.events:,} | {r.batches:,} | {r.events / r.append.wall_s:,.0f} "
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
    lines += append_lines(results, commits, run)
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


ROUNDS = 5


def _load_average() -> str:
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


def run(quick: bool) -> str:
    """Measure every available backend; return the Markdown section."""
    plan = batches(5_000 if quick else 100_000)
    runs = 3 if quick else 7
    results: list[Result] = []
    texts: dict[str, str] = {}
    backends: list[Backend] = []
    missing: list[str] = []
    for name, factory in (("JSONL", _jsonl_backend), ("SQLite", _sqlite_backend)):
        backend = factory()
        if backend is None:
            missing.append(name)
        else:
            backends.append(backend)
    loads = [_load_average()]
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp_name:
        root = Path(tmp_name)
        costs, anchor, per_round = append_interleaved(backends, root, plan, ROUNDS)
        loads.append(_load_average())
        for backend in backends:
            result, texts[backend.name] = measure(
                backend, root / backend.name, plan, costs[backend.name], runs
            )
            results.append(result)
        loads.append(_load_average())
    tmpfs: dict[str, AppendTime] | None = None
    tmpfs_ratios: dict[str, Ratio] | None = None
    tmpfs_plan = plan[: 200 if quick else 1_000]
    shm = tmpfs_root()
    if shm is not None and anchor is not None:
        with tempfile.TemporaryDirectory(prefix="dsh-bench-", dir=shm) as shm_name:
            tmpfs, shm_anchor, shm_rounds = append_interleaved(
                backends, Path(shm_name), tmpfs_plan, ROUNDS
            )
        assert shm_anchor is not None
        tmpfs["anchor"] = shm_anchor.cost
        tmpfs_ratios = median_ratios(shm_rounds)
    flushes = {
        key: flushes_per_batch(key, 10 if quick else 40) for key in ("jsonl", "sqlite", "anchor")
    }
    if "JSONL" in texts and "SQLite" in texts:
        if texts["JSONL"] != texts["SQLite"]:
            raise AssertionError("the SQLite export differs from the JSONL file of the same log")
        for result in results:
            if result.backend == "SQLite":
                result.same_text_as = "JSONL"
    commits = {backend.name: backend.commit for backend in backends}
    append_run = AppendRun(
        anchor,
        costs["floor"],
        median_ratios(per_round) if anchor is not None else {},
        ROUNDS,
        {"JSONL": flushes["jsonl"], "SQLite": flushes["sqlite"], "anchor": flushes["anchor"]},
        tmpfs,
        tmpfs_ratios,
        len(tmpfs_plan),
        loads,
    )
    return render(results, commits, missing, quick, append_run)


if __name__ == "__main__":
    print(run(quick=True))

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
(``PRAGMA synchronous``), not assumed.
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
APPEND_TARGET = 2.0


@dataclass(frozen=True, slots=True)
class Backend:
    """How to open one store kind under a temporary directory and find its bytes."""

    name: str
    open: Callable[[Path], SessionStore]
    files: Callable[[Path], list[Path]]
    jsonl_text: Callable[[SessionStore, Path], str]
    commit: str
    """How one batch is made durable, as the report states it."""


@dataclass(slots=True)
class AppendTime:
    """One side's accumulated append cost: wall seconds and user CPU seconds (whole process)."""

    wall_s: float = 0.0
    user_s: float = 0.0

    @property
    def commit_s(self) -> float:
        """Wall time not spent in user code: kernel writes, flushes and waiting on the disk."""
        return self.wall_s - self.user_s


@dataclass(frozen=True, slots=True)
class Anchor:
    """The anchor's append cost and how durable its commits are."""

    cost: AppendTime
    journal_mode: str
    synchronous: int


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
    backends: list[Backend], root: Path, plan: list[list[Event]]
) -> tuple[dict[str, AppendTime], Anchor | None]:
    """Append ``plan`` to every backend (under ``root/<name>``) and to the anchor, batch by
    batch in rotating order, each batch one durable commit. Returns each side's cost."""
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
    try:
        for index in range(len(plan)):
            shift = index % len(sides)
            for name, append in sides[shift:] + sides[:shift]:
                cost = costs[name]
                wall, user = time.perf_counter(), _user_cpu()
                append(index)
                cost.user_s += _user_cpu() - user
                cost.wall_s += time.perf_counter() - wall
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
        return costs, None
    return costs, Anchor(anchor_cost, *durability)


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


_SYNCHRONOUS = {
    0: "OFF: never synced, not durable",
    1: "NORMAL: in WAL mode the commit is not synced (lost on power cut)",
    2: "FULL: the WAL fdatasynced on every commit",
    3: "EXTRA: the WAL and its directory synced on every commit",
}


def _append_lines(
    results: list[Result], commits: dict[str, str], anchor: Anchor | None, floor: AppendTime
) -> list[str]:
    """The append comparison: wall-clock events/s, the anchor ratio, and where time goes."""
    if not results:
        return []
    events, batch_count = results[0].events, results[0].batches
    lines = [
        f"Append: the sides above and the anchor append the same {batch_count:,} batches (one "
        f"whole turn each, {events / batch_count:.1f} events on average), interleaved batch by "
        "batch in rotating order so the shared disk's varying fsync latency hits them alike. "
        "*User CPU* is the process's user time (the anchor's worker thread included); "
        "*commit* is the rest of the wall time per batch: the kernel writing and flushing, and "
        "waiting for the disk. *Ceiling* is the ratio to the anchor this side would reach with "
        "no user CPU at all. Every side flushes once per batch, so the slower the disk's "
        "flush at the time of the run, the closer every ratio comes to 1x.\n",
        "| side | durable commit per batch | events/s | x anchor | target | user CPU µs/event | "
        "commit ms/batch | ceiling |",
        "|---|---|---:|---:|---|---:|---:|---:|",
    ]
    rows: list[tuple[str, str, AppendTime]] = [
        (r.backend, commits[r.backend], r.append) for r in results
    ]
    if anchor is not None:
        mode = anchor.journal_mode.upper()
        sync = _SYNCHRONOUS.get(anchor.synchronous, str(anchor.synchronous))
        rows.append(
            (
                "anchor: OpenAI Agents `SQLiteSession.add_items`",
                f"{mode}, `synchronous={anchor.synchronous}` ({sync})",
                anchor.cost,
            )
        )
    rows.append(
        (
            "floor: no store, the batch's bytes encoded beforehand",
            "one `write`, then `fsync`",
            floor,
        )
    )
    for side, commit, cost in rows:
        rate = events / cost.wall_s
        if cost is floor:
            ratio = "" if anchor is None else f"{rate / (events / anchor.cost.wall_s):.2f}x"
            verdict = "the most any side could reach"
        elif anchor is None:
            ratio, verdict = "", ""
        elif cost is anchor.cost:
            ratio, verdict = "1.00x", ""
        else:
            value = rate / (events / anchor.cost.wall_s)
            ratio = f"**{value:.2f}x**"
            verdict = f"≥ {APPEND_TARGET:g}x: {'met' if value >= APPEND_TARGET else 'missed'}"
        commit_ms = cost.commit_s / batch_count * 1e3
        ceiling = (
            ""
            if anchor is None or cost is anchor.cost or cost is floor
            else f"{anchor.cost.wall_s / cost.commit_s:.2f}x"
        )
        lines.append(
            f"| {side} | {commit} | {rate:,.0f} | {ratio} | {verdict} | "
            f"{cost.user_s / events * 1e6:.1f} | {commit_ms:.2f} | {ceiling} |"
        )
    lines.append("")
    if anchor is None:
        lines.append("- Append anchor: not measured (`openai-agents` is not installed here).")
        return lines
    user_ms = anchor.cost.user_s / batch_count * 1e3
    commit_ms = anchor.cost.commit_s / batch_count * 1e3
    floor_ms = floor.wall_s / batch_count * 1e3
    reach = anchor.cost.wall_s / floor.wall_s
    lines += [
        "- Like with like: every side returns from a batch only once it is durable (the "
        "anchor's `synchronous` is read from its own connection, not assumed), every side gets "
        "the same events, and the anchor gets them already as JSON-ready dicts (its input "
        "type; our stores encode from `Event`s inside the timing).",
        f"- Per batch the anchor spends {user_ms:.2f} ms of user CPU and {commit_ms:.2f} ms "
        f"committing; the disk alone (the floor row) took {floor_ms:.2f} ms per batch, so no "
        f"store that makes each batch durable could append more than **{reach:.2f}x** the "
        "anchor's events/s in this run"
        + (
            f" (the {APPEND_TARGET:g}x target is out of reach on this disk at this time)."
            if reach < APPEND_TARGET
            else "."
        ),
    ]
    floor_user = floor.user_s / events * 1e6
    anchor_user = anchor.cost.user_s / events * 1e6 - floor_user
    overheads = ", ".join(
        f"{r.backend} {r.append.user_s / events * 1e6 - floor_user:.1f} µs "
        f"(the anchor's is {anchor_user / (r.append.user_s / events * 1e6 - floor_user):.1f}x)"
        for r in results
    )
    lines.append(
        "- What a store controls, independent of the disk: user CPU per event above the floor's "
        f"(which does no per-event work: {floor_user:.1f} µs is the accounting noise of a "
        f"write and a flush on this machine): anchor {anchor_user:.1f} µs, {overheads}."
    )
    return lines


def render(
    results: list[Result],
    commits: dict[str, str],
    missing: list[str],
    quick: bool,
    anchor: Anchor | None,
    floor: AppendTime,
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
    lines += _append_lines(results, commits, anchor, floor)
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
    backends: list[Backend] = []
    missing: list[str] = []
    for name, factory in (("JSONL", _jsonl_backend), ("SQLite", _sqlite_backend)):
        backend = factory()
        if backend is None:
            missing.append(name)
        else:
            backends.append(backend)
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp_name:
        root = Path(tmp_name)
        costs, anchor = append_interleaved(backends, root, plan)
        for backend in backends:
            result, texts[backend.name] = measure(
                backend, root / backend.name, plan, costs[backend.name], runs
            )
            results.append(result)
    if "JSONL" in texts and "SQLite" in texts:
        if texts["JSONL"] != texts["SQLite"]:
            raise AssertionError("the SQLite export differs from the JSONL file of the same log")
        for result in results:
            if result.backend == "SQLite":
                result.same_text_as = "JSONL"
    commits = {backend.name: backend.commit for backend in backends}
    return render(results, commits, missing, quick, anchor, costs["floor"])


if __name__ == "__main__":
    print(run(quick=True))

"""Replay benchmark: a recorded model call, from its session log to chunks in the agent's hands.

For a recorded step of N text-delta chunks (plus ``finish``) three things are timed:

- the floor: plain ``json.loads`` over the step's ``assistant/chunk`` lines, already in memory;
- dsh replay: read the temporary ``session.jsonl``, parse it (``dsh_core.read_log_text``),
  derive the script and stream it through ``ReplayModelClient`` (all inside a running event
  loop, so loop start-up is not counted);
- vcrpy: the same chunks served once as an SSE stream by a 127.0.0.1 server and recorded in a
  cassette, then replayed by vcrpy through httpx (cassette load included: a test pays it),
  every ``data:`` line decoded with ``json.loads``.

Targets: dsh replay within 2x the floor at N = 100 and within 1.2x at N = 10,000. The three
are measured round-robin, so load on the shared machine hits them alike; medians reported.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import vcr  # pyright: ignore[reportMissingTypeStubs]

from dsh_core import ModelRequest
from dsh_llm_replay import ReplayModelClient, load_session_scripts

TARGETS = {100: 2.0, 10_000: 1.2}
DESCRIPTION = (
    "One recorded step of N `text-delta` chunks plus `finish`. *Floor*: `json.loads` of the "
    "step's chunk lines, in memory. *dsh replay*: read `session.jsonl`, parse "
    "(`read_log_text`), derive, stream every chunk through `ReplayModelClient`. *vcrpy*: the "
    "same chunks as an SSE response recorded from 127.0.0.1 once, replayed by vcrpy through "
    "httpx (cassette load and `httpx.Client` set-up included: a test pays both), each "
    "`data:` line `json.loads`-ed. Medians of "
    "interleaved runs in milliseconds; *best* is the ratio of the fastest runs, a check on "
    "noise from other load on the machine."
)


def session_log(n: int) -> tuple[str, list[str]]:
    """A log with one step of ``n`` text-delta chunks and ``finish``, and its chunk lines."""

    def line(obj: object) -> str:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

    time0 = 1_782_133_842_298
    rows: list[str] = [
        line({"type": "session", "version": 0, "id": "bench", "createdAt": time0}),
        line(
            {
                "type": "turn/start",
                "seq": 0,
                "time": time0,
                "data": {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}},
            }
        ),
        line({"type": "step/start", "seq": 1, "time": time0, "data": {"turn": 1, "step": 1}}),
    ]
    chunks: list[dict[str, object]] = [
        {"type": "text-delta", "index": 0, "text": f"token {k} — «ü» "} for k in range(n)
    ]
    chunks.append({"type": "finish", "reason": {"kind": "stop"}})
    chunk_lines = [
        line(
            {
                "type": "assistant/chunk",
                "seq": 2 + k,
                "time": time0 + k,
                "data": {"turn": 1, "step": 1, "chunk": chunk},
            }
        )
        for k, chunk in enumerate(chunks)
    ]
    seq = 2 + len(chunks)
    rows += chunk_lines
    rows.append(
        line({"type": "step/end", "seq": seq, "time": time0, "data": {"turn": 1, "step": 1}})
    )
    rows.append(
        line(
            {
                "type": "turn/end",
                "seq": seq + 1,
                "time": time0,
                "data": {"turn": 1, "reason": {"kind": "completed"}},
            }
        )
    )
    return "\n".join(rows) + "\n", chunk_lines


@contextmanager
def sse_server(body: bytes) -> Generator[str]:
    """A 127.0.0.1 server answering every POST with ``body`` as ``text/event-stream``."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def sse_stream(url: str) -> int:
    """POST, iterate the SSE lines and decode every ``data:`` payload; returns the count."""
    count = 0
    with httpx.Client() as client, client.stream("POST", url, json={"stream": True}) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                json.loads(line[6:])
                count += 1
    return count


def record_cassette(folder: Path, chunk_lines: list[str]) -> tuple[Path, str]:
    """Record the SSE response once from a local server; returns the cassette and the URL."""
    body = "".join(f"data: {line}\n\n" for line in chunk_lines) + "data: [DONE]\n\n"
    cassette = folder / "cassette.yaml"
    with (
        sse_server(body.encode()) as url,
        vcr.use_cassette(str(cassette), record_mode="all"),  # pyright: ignore
    ):
        assert sse_stream(url) == len(chunk_lines)
    return cassette, url


def vcr_replay(cassette: Path, url: str) -> int:
    # The server is gone: record_mode "none" fails loudly if vcrpy did not serve the request.
    with vcr.use_cassette(str(cassette), record_mode="none"):  # pyright: ignore
        return sse_stream(url)


async def dsh_replay(path: Path) -> int:
    client = ReplayModelClient(load_session_scripts(path, []))
    count = 0
    async for _ in client.stream(ModelRequest(session_id="live", messages=[])):
        count += 1
    client.assert_consumed()
    return count


def measure(n: int, runs: int) -> dict[str, float]:
    """Median seconds of the floor, dsh replay and vcrpy for one N."""
    text, chunk_lines = session_log(n)
    samples: dict[str, list[float]] = {"floor": [], "replay": [], "vcr": []}
    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-replay-") as tmp:
        folder = Path(tmp)
        path = folder / "session.jsonl"
        path.write_text(text, encoding="utf-8")
        cassette, url = record_cassette(folder, chunk_lines)

        def floor() -> int:
            loads = json.loads
            return len([loads(line) for line in chunk_lines])

        async def timed_replay() -> float:
            started = time.perf_counter()
            assert await dsh_replay(path) == n + 1
            return time.perf_counter() - started

        def timed(fn: Callable[[], int]) -> float:
            started = time.perf_counter()
            assert fn() == n + 1
            return time.perf_counter() - started

        try:
            for run in range(runs + 1):  # run 0 warms caches and is dropped
                gc.collect()
                floor_s = timed(floor)
                gc.collect()
                replay_s = loop.run_until_complete(timed_replay())
                gc.collect()
                vcr_s = timed(lambda: vcr_replay(cassette, url))
                if run:
                    samples["floor"].append(floor_s)
                    samples["replay"].append(replay_s)
                    samples["vcr"].append(vcr_s)
        finally:
            loop.close()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    medians["best"] = min(samples["replay"]) / min(samples["floor"])
    return medians


def run(quick: bool) -> str:
    """Measure N = 100 and N = 10,000 and return the Markdown section."""
    logging.getLogger("vcr").setLevel(logging.WARNING)
    plan = {100: 30, 10_000: 3} if quick else {100: 100, 10_000: 21}
    rows: list[str] = []
    verdicts: list[str] = []
    for n, runs in plan.items():
        result = measure(n, runs)
        floor = result["floor"]
        ratio = result["replay"] / floor
        target = TARGETS[n]
        verdict = "PASS" if ratio <= target else "FAIL"
        verdicts.append(verdict)
        rows.append(
            f"| {n:,} | {runs} | {floor * 1e3:.3f} | {result['replay'] * 1e3:.3f} "
            f"| **{ratio:.2f}x** | {result['best']:.2f}x | ≤ {target}x | {verdict} "
            f"| {result['vcr'] * 1e3:.2f} "
            f"| {result['vcr'] / floor:.1f}x |"
        )
    return "\n".join(
        [
            "## Replay: a recorded call streamed from its session log (`bench/bench_replay.py`)",
            "",
            DESCRIPTION,
            "",
            "| N | runs | floor ms | dsh replay ms | replay / floor | best | target | result "
            "| vcrpy ms | vcrpy / floor |",
            "|---:|---:|---:|---:|---:|---:|---|---|---:|---:|",
            *rows,
            "",
            f"Overall: {'PASS' if all(v == 'PASS' for v in verdicts) else 'FAIL'}"
            + (" (quick run: few repetitions)" if quick else ""),
            "",
        ]
    )


if __name__ == "__main__":
    print(run(quick=True))

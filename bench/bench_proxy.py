"""Proxy benchmark: the same ``openai`` SDK calls replayed by dsh-llm-proxy and by vcrpy.

One conversation of the official ``openai`` SDK: a call answered with two parallel tool calls,
then ``K - 1`` streamed text answers of ``N`` deltas each, every request carrying the whole
conversation so far. It is recorded twice against the scripted model server on 127.0.0.1:
through ``dsh-llm-proxy record`` (DSH session logs, JSONL) and with vcrpy (one YAML cassette).
Both are then replayed with the server stopped:

- *proxy*: start ``dsh-llm-proxy replay`` on the recording (load, derive, bind), run the
  calls, stop it and check consumption; *proxy calls* is the calls alone, the server up;
- *vcrpy*: open the cassette (``record_mode="none"``) and run the calls.

Sizes are the bytes on disk of the recording root and of the cassette. Medians of
interleaved runs in milliseconds.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import vcr  # pyright: ignore[reportMissingTypeStubs]

from dsh_core import Chunk, ContentBlock
from dsh_llm_openai import SESSION_HEADER
from dsh_llm_proxy import ProxyServer
from dsh_scripted_server import Response, ScriptedModelServer

KEY_ENV = "DSH_BENCH_PROXY_UPSTREAM_KEY"
DESCRIPTION = (
    "The same `openai` SDK conversation (a call answered with two parallel tool calls, then "
    "streamed text answers of N deltas, each request carrying the whole conversation) recorded "
    "against the scripted server through `dsh-llm-proxy record` (JSONL session logs) and with "
    "vcrpy (one YAML cassette), then replayed with the server stopped. *proxy*: start "
    "`dsh-llm-proxy replay` in-process (load, derive, bind), run the calls, stop, check "
    "consumption; *proxy calls*: the calls alone with the proxy up; *vcrpy*: open the cassette "
    '(`record_mode="none"`) and run the calls. Sizes are bytes on disk. Medians of '
    "interleaved runs in milliseconds."
)

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def _script(calls: int, deltas: int) -> list[list[Response]]:
    tool_calls: list[Chunk] = []
    for index, city in enumerate(("Paris", "Rome")):
        arguments = json.dumps({"city": city})
        call_id = f"call_{index}"
        tool_calls.append({"type": "block-start", "index": index, "blockType": "tool-call"})
        tool_calls.append(
            {
                "type": "tool-call-delta",
                "index": index,
                "id": call_id,
                "name": "weather",
                "argumentsDelta": arguments,
            }
        )
    for index, city in enumerate(("Paris", "Rome")):
        block: ContentBlock = {
            "type": "tool-call",
            "id": f"call_{index}",
            "name": "weather",
            "arguments": json.dumps({"city": city}),
        }
        tool_calls.append({"type": "block-end", "index": index, "block": block})
    tool_calls.append({"type": "finish", "reason": {"kind": "tool-calls"}})
    answers: list[Response] = [tool_calls]
    for k in range(calls - 1):
        words = [f"w{k}.{i} " for i in range(deltas)]
        text: list[Chunk] = [{"type": "block-start", "index": 0, "blockType": "text"}]
        text.extend({"type": "text-delta", "index": 0, "text": w} for w in words)
        text.append(
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(words)}}
        )
        text.append({"type": "finish", "reason": {"kind": "stop"}})
        answers.append(text)
    return [answers]


def conversation(base_url: str, calls: int) -> list[str]:
    """The SDK calls both sides replay; returns what the agent saw."""
    seen: list[str] = []
    # The header routes the scripted server; both sides send it, so the calls are the same.
    with openai.OpenAI(
        base_url=base_url,
        api_key="dummy",
        max_retries=0,
        default_headers={SESSION_HEADER: "bench"},
    ) as client:
        history: list[Any] = [{"role": "user", "content": "Weather in Paris and Rome?"}]
        # Streamed throughout: the scripted server only streams, and vcrpy records it directly.
        calls_seen: dict[int, dict[str, Any]] = {}
        stream = client.chat.completions.create(
            model="m", messages=history, tools=TOOLS, stream=True
        )
        for chunk in stream:
            for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                entry = calls_seen.setdefault(delta.index, {"id": delta.id, "arguments": ""})
                if delta.function is not None:
                    entry["name"] = delta.function.name or entry.get("name")
                    entry["arguments"] += delta.function.arguments or ""
        tool_calls: list[dict[str, Any]] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls_seen.values()
        ]
        history.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        for call in tool_calls:
            seen.append(str(call["id"]))
            history.append({"role": "tool", "tool_call_id": call["id"], "content": "sunny"})
        for k in range(calls - 1):
            stream = client.chat.completions.create(model="m", messages=history, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            seen.append(text)
            history += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": f"and then {k}?"},
            ]
    return seen


def _size(path: Path) -> int:
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if path.is_dir()
        else (path.stat().st_size)
    )


def measure(calls: int, deltas: int, runs: int) -> dict[str, float]:
    """Median seconds of each replay and the recording sizes for one shape."""
    os.environ[KEY_ENV] = "bench-upstream-key"
    samples: dict[str, list[float]] = {"proxy": [], "proxy_calls": [], "vcr": []}
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        root, cassette = Path(tmp) / "proxy", Path(tmp) / "cassette.yaml"
        with (
            ScriptedModelServer(_script(calls, deltas), api_key="bench-upstream-key") as up,
            ProxyServer.record(root, upstream=up.base_url, api_key_env=KEY_ENV) as proxy,
        ):
            expected = conversation(proxy.base_url, calls)
        with ScriptedModelServer(_script(calls, deltas), api_key="dummy") as up:
            url = up.base_url
            with vcr.use_cassette(str(cassette), record_mode="all"):  # pyright: ignore
                assert conversation(url, calls) == expected

        def proxy_replay() -> float:
            started = time.perf_counter()
            with ProxyServer.replay(root) as server:
                began = time.perf_counter()
                assert conversation(server.base_url, calls) == expected
                samples["proxy_calls"].append(time.perf_counter() - began)
                assert server.problems() == []
            return time.perf_counter() - started

        def vcr_replay() -> float:
            started = time.perf_counter()
            with vcr.use_cassette(str(cassette), record_mode="none"):  # pyright: ignore
                assert conversation(url, calls) == expected
            return time.perf_counter() - started

        timed: dict[str, Callable[[], float]] = {"proxy": proxy_replay, "vcr": vcr_replay}
        for _ in range(runs):
            for name, fn in timed.items():
                gc.collect()
                samples[name].append(fn())
        sizes = {"proxy_bytes": float(_size(root)), "vcr_bytes": float(_size(cassette))}
    return {name: statistics.median(values) for name, values in samples.items()} | sizes


def run(quick: bool) -> str:
    """Measure and return the Markdown section."""
    logging.getLogger("vcr").setLevel(logging.WARNING)
    shapes = [(3, 20, 3)] if quick else [(3, 20, 15), (11, 200, 9)]
    rows: list[str] = []
    for calls, deltas, runs in shapes:
        r = measure(calls, deltas, runs)
        ratio = r["vcr_bytes"] / r["proxy_bytes"]
        rows.append(
            f"| {calls} | {deltas} | {runs} | {r['proxy'] * 1e3:.1f} "
            f"| {r['proxy_calls'] * 1e3:.1f} | {r['vcr'] * 1e3:.1f} "
            f"| {r['proxy_bytes'] / 1024:.1f} KiB | {r['vcr_bytes'] / 1024:.1f} KiB "
            f"| {ratio:.2f}x |"
        )
    return "\n".join(
        [
            "## Proxy beside vcrpy: the same `openai` SDK calls (`bench/bench_proxy.py`)\n",
            DESCRIPTION + "\n",
            "| calls | deltas | runs | proxy ms | proxy calls ms | vcrpy ms | proxy recording "
            "| vcrpy cassette | cassette / recording |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
        ]
    )

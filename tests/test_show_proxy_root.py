"""``dsh-snapshot show`` on a recording root that ``dsh-llm-proxy`` wrote (issue #14, item 5):
a real proxy records a conversation and a fork of it against the scripted upstream, in both
stores, and ``show`` draws the primary, the fork child, its seed boundary and its own call."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_core import Chunk
from dsh_llm_proxy import ProxyServer
from dsh_scripted_server import ScriptedModelServer

KEY_ENV = "DSH_SHOW_TEST_UPSTREAM_KEY"
SCRIPT = str(Path(sys.executable).parent / "dsh-snapshot")


def _text(text: str) -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {
            "type": "usage",
            "usage": {
                "inputTokens": 7,
                "outputTokens": 3,
                "cacheReadTokens": 0,
                "reasoningTokens": 0,
            },
        },
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def _ask(base_url: str, messages: list[dict[str, Any]]) -> str:
    body = {"model": "m", "stream": False, "messages": messages}
    reply = httpx.post(f"{base_url}/chat/completions", json=body, timeout=30)
    reply.raise_for_status()
    return str(reply.json()["choices"][0]["message"]["content"])


def _record(root: Path, store: str) -> None:
    """Session A: turn 1, then turn 2; a third request shares turn 1 and diverges: a fork."""
    os.environ[KEY_ENV] = "not-a-real-key"
    one = {"role": "user", "content": "one"}
    scripts = [[_text("x"), _text("z")], [_text("FORKED")]]
    with (
        ScriptedModelServer(scripts) as upstream,
        ProxyServer.record(root, store=store, upstream=upstream.base_url, api_key_env=KEY_ENV) as p,
    ):
        assert _ask(p.base_url, [one]) == "x"
        said = {"role": "assistant", "content": "x"}
        assert _ask(p.base_url, [one, said, {"role": "user", "content": "two"}]) == "z"
        assert _ask(p.base_url, [one, said, {"role": "user", "content": "other"}]) == "FORKED"


@pytest.mark.parametrize("store", ["jsonl", "sqlite", "memory"])
def test_show_draws_a_proxy_recording(tmp_path: Path, store: str) -> None:
    root = tmp_path / "recording"
    _record(root, store)
    shown = subprocess.run(
        [SCRIPT, "show", str(root), "--html", str(tmp_path / "tree.html")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "recording  (proxy, 2 sessions)"
    label = r"\S+\.jsonl"  # each session as its store backend exports it
    assert re.match(rf"^{label}  primary · \d+ events · model m · 2 model calls", lines[1])
    # The fork diverged after turn 1, so it hangs under turn 1, before turn 2.
    fork = next(line for line in lines if "forked after turn 1" in line)
    assert re.search(rf"├─ {label}  forked after turn 1 · seedLength \d+ ·", fork)
    assert lines.index(fork) < next(i for i, x in enumerate(lines) if "turn 2 completed" in x)
    assert "1 model call (5 chunks) · tokens in 7, out 3, cache 0, reasoning 0" in fork
    text = "\n".join(lines)
    assert "┆ turn 1 completed" in text  # the inherited turn, marked
    assert "seed boundary" in text
    assert 'final: "FORKED"' in text
    assert 'prompt: "other"' in text
    page = (tmp_path / "tree.html").read_text(encoding="utf-8")
    assert page.count('data-kind="fork"') == 1
    assert "not-a-real-key" not in shown.stdout + page

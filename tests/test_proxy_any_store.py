"""The proxy records into, and replays from, any installed store backend: the proof.

``tests/plugins/dsh-store-memory`` registers the ``dsh.stores`` entry point ``memory`` in its
own package and no code of the workspace names it (``test_store_plugin.py`` checks that). Were
the proxy to keep its own store list or file layout, ``--store memory`` would be refused, or
the replay would find no sessions, and these tests would fail.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import httpx
import pytest

from dsh_core import Chunk
from dsh_llm_proxy import STORE_MARKER, ProxyServer, is_recording_root, main, recorded_logs
from dsh_scripted_server import ScriptedModelServer

# A test plugin (the `test-plugins` group): tests/conftest.py skips, or fails where it must be.
pytestmark = pytest.mark.test_plugin("dsh-store-memory")

KEY_ENV = "DSH_PROXY_TEST_UPSTREAM_KEY"
ANSWER: list[Chunk] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "from "},
    {"type": "text-delta", "index": 0, "text": "memory"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "from memory"}},
    {"type": "finish", "reason": {"kind": "stop"}},
]


def _ask(base_url: str) -> str:
    """One streamed chat call through the proxy: the answer's text."""
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    text = ""
    with (
        httpx.Client(trust_env=False, timeout=30) as http,
        http.stream("POST", base_url + "/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        for line in response.iter_lines():
            data = line.removeprefix("data: ")
            if not line.startswith("data: ") or data == "[DONE]":
                continue
            for choice in json.loads(data).get("choices", []):
                text += choice.get("delta", {}).get("content") or ""
    return text


def test_the_proxy_records_and_replays_through_a_third_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "upstream-" + secrets.token_hex(12)
    monkeypatch.setenv(KEY_ENV, key)
    root = tmp_path / "root"
    with (
        ScriptedModelServer([[ANSWER]], api_key=key) as upstream,
        ProxyServer.record(
            root, store="memory", upstream=upstream.base_url, api_key_env=KEY_ENV
        ) as proxy,
    ):
        recorded = _ask(proxy.base_url)
    # The memory backend's own layout (its dump), named by the root for its readers.
    assert (root / STORE_MARKER).read_text() == "memory\n"
    assert (root / "memory.json").is_file()
    assert not list(root.glob("*.jsonl"))
    assert is_recording_root(root)
    [(name, log)] = recorded_logs(root)
    assert name == f"{log.header.id}.jsonl"
    assert [e.data["chunk"]["type"] for e in log.events if e.type == "assistant/chunk"][-1] == (
        "finish"
    )
    with ProxyServer.replay(root) as proxy:
        replayed = _ask(proxy.base_url)
        assert proxy.problems() == []
    assert recorded == replayed == "from memory"


def test_the_cli_takes_any_installed_store_and_refuses_an_unknown_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(KEY_ENV, "k")
    argv = ["record", "--root", str(tmp_path / "r"), "--api-key-env", KEY_ENV, "--store"]
    assert main([*argv, "no-such-store"]) == 2
    err = capsys.readouterr().err
    assert "no-such-store" in err
    assert "memory" in err  # the message lists what is installed

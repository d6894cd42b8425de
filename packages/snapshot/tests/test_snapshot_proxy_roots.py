"""A ``dsh-llm-proxy`` recording root is a folder the gate understands.

Its logs (in either store) are read through the proxy's own ``recorded_logs``, and the key
scan catches a key a recorded model answer carries, in either layout, on its own or inside a
scenario folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_core import Chunk, SessionLog
from dsh_llm_proxy import ProxyServer, recorded_logs
from dsh_scripted_server import ScriptedModelServer
from dsh_snapshot import SnapshotSettings, load_scenario, run_scenario, scan_folder
from dsh_snapshot._foreign import recording_logs, stage_recording

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "snapshots" / "foreign" / "acp-example"
PLANTED = "sk-" + "f00dfacecafe" * 3  # shaped like a DeepSeek key; never a real one
STORES = ("jsonl", "sqlite")


def _answer(text: str) -> list[Chunk]:
    half = len(text) // 2
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text[:half]},
        {"type": "text-delta", "index": 0, "text": text[half:]},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


@pytest.fixture
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DSH_TEST_UPSTREAM_KEY", "upstream-placeholder")
    return "DSH_TEST_UPSTREAM_KEY"


def _record(root: Path, store: str, key_env: str, *answers: str) -> None:
    """Two calls of one conversation through a recording proxy."""
    with ScriptedModelServer() as upstream:
        upstream.add_session([_answer(a) for a in answers])
        with ProxyServer.record(
            root, store=store, upstream=upstream.base_url, api_key_env=key_env
        ) as proxy:
            messages: list[dict[str, str]] = []
            for number, answer in enumerate(answers, 1):
                messages.append({"role": "user", "content": f"question {number}"})
                response = httpx.post(
                    f"{proxy.base_url}/chat/completions",
                    json={"model": "m", "messages": messages},
                    timeout=30,
                )
                assert response.status_code == 200, response.text
                messages.append({"role": "assistant", "content": answer})


@pytest.mark.parametrize("store", STORES)
def test_a_proxy_root_is_read_through_cores_log_reader(
    tmp_path: Path, store: str, upstream_key: str
) -> None:
    root = tmp_path / "recording"
    _record(root, store, upstream_key, "first answer", "second answer")
    (log,) = recording_logs(root)
    [(_, as_recorded)] = recorded_logs(root)  # the proxy's own reading of its root
    assert log == as_recorded
    assert [e.type for e in log.events].count("turn/end") == 2
    texts = [e.data["content"][0]["text"] for e in log.events if e.type == "assistant/message"]
    assert texts == ["first answer", "second answer"]

    # Staged into a fresh root (as the gate stages committed fixtures), the proxy replays it.
    fixture = tmp_path / "session.jsonl"
    fixture.write_text(
        "\n".join(json.dumps(row) for row in [log.header.to_json(), *_rows(log)]) + "\n",
        encoding="utf-8",
    )
    staged = tmp_path / "staged"
    staged.mkdir()
    stage_recording([fixture], staged, store)
    with ProxyServer.replay(staged) as proxy:
        messages: list[dict[str, str]] = []
        for number in (1, 2):
            messages.append({"role": "user", "content": f"question {number}"})
            body = {"model": "m", "messages": messages}
            answer = httpx.post(f"{proxy.base_url}/chat/completions", json=body, timeout=30)
            content = answer.json()["choices"][0]["message"]["content"]
            assert content == texts[number - 1]
            messages.append({"role": "assistant", "content": content})
        assert proxy.problems() == []


def _rows(log: SessionLog) -> list[dict[str, Any]]:
    return [e.to_json() for e in log.events]


@pytest.mark.parametrize("store", STORES)
def test_a_key_in_a_proxy_recording_is_caught(
    tmp_path: Path, store: str, upstream_key: str
) -> None:
    root = tmp_path / "recording"
    _record(root, store, upstream_key, f"the key is {PLANTED}")
    findings = scan_folder(root)
    assert findings, f"no finding in the {store} proxy root"
    # The scan names the store's own files (one log per session, or the database and its
    # write-ahead log), whatever the backend's layout.
    assert recorded_logs(root)
    stored = {p.name for p in root.iterdir() if p.is_file()}
    assert {f.file for f in findings} <= stored | {f"{n}-wal" for n in stored}
    assert all("sk- API key" in f.kind for f in findings)
    assert all(PLANTED not in str(f) for f in findings)  # named by hash, never by value


def test_a_scenario_holding_a_dirty_proxy_root_is_refused_before_it_runs(
    tmp_path: Path, upstream_key: str
) -> None:
    if not (EXAMPLE / "input.json").is_file():
        pytest.skip(f"{EXAMPLE} is not committed")
    folder = Path(shutil.copytree(EXAMPLE, tmp_path / "foreign" / "acp-example"))
    _record(folder / "llm_recordings" / "test_x", "jsonl", upstream_key, f"key {PLANTED}")
    result = run_scenario(load_scenario(folder), SnapshotSettings())
    assert not result.ok
    assert result.failures
    assert all(f.startswith("key scan:") for f in result.failures), result.failures
    assert "llm_recordings/test_x/" in result.failures[0]
    assert result.calls_replayed == 0  # nothing of it ran
    assert PLANTED not in "\n".join(result.failures)

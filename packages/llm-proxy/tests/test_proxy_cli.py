"""``dsh-llm-proxy`` as a real process: record, replay, and the exit status that reports
whether the replay consumed the recording exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import openai

from dsh_core import Chunk
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_scripted_server import ScriptedModelServer

KEY_ENV = "DSH_PROXY_TEST_UPSTREAM_KEY"
SCRIPT = str(Path(sys.executable).parent / "dsh-llm-proxy")


@dataclass
class Exited:
    """How the process ended (filled in when the ``with`` block closes)."""

    returncode: int | None = None
    stderr: str = ""


@contextmanager
def _proxy(*args: str) -> Generator[tuple[str, Exited]]:
    exited = Exited()
    with subprocess.Popen(
        [SCRIPT, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("BASE_URL="), line
            yield line.strip().removeprefix("BASE_URL="), exited
        finally:
            process.send_signal(signal.SIGTERM)
            _, exited.stderr = process.communicate(timeout=30)
            exited.returncode = process.returncode


def _ask(base_url: str) -> str | None:
    with openai.OpenAI(base_url=base_url, api_key="dummy", max_retries=0) as client:
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    return reply.choices[0].message.content


def test_record_then_replay_as_processes(
    tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> None:
    root = tmp_path / "rec"
    with ScriptedModelServer([[make_text(["hi ", "there"])]], api_key=upstream_key) as upstream:
        args = ["record", "--root", str(root), "--upstream", upstream.base_url]
        with _proxy(*args, "--api-key-env", KEY_ENV) as (url, process):
            assert _ask(url) == "hi there"
        assert process.returncode == 0
    store = JsonlSessionStore(root)
    try:
        assert len(store.list_sessions()) == 1
    finally:
        store.close()

    with _proxy("replay", "--root", str(root)) as (url, process):
        assert _ask(url) == "hi there"
    assert process.returncode == 0

    with _proxy("replay", "--root", str(root)) as (url, process):
        pass  # no call: the recording is not consumed
    assert process.returncode == 1
    assert "never bound to a live session" in process.stderr

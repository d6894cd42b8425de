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

import httpx
import openai
import pytest

from dsh_core import Chunk
from dsh_llm_proxy import REPORT_PATH, ProxyServer
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


def _ask(base_url: str, prompt: str = "hi") -> str | None:
    with openai.OpenAI(base_url=base_url, api_key="dummy", max_retries=0) as client:
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": prompt}]
        )
    return reply.choices[0].message.content


@pytest.fixture
def recorded_hi(
    tmp_path: Path,
    upstream_key: str,
    make_text: Callable[..., list[Chunk]],
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """A root holding one call ("hi" → "hi there"), recorded against a scripted server in
    process (the process's own record is the first test); the key is gone afterwards."""
    root = tmp_path / "rec"
    with (
        ScriptedModelServer([[make_text(["hi ", "there"])]], api_key=upstream_key) as upstream,
        ProxyServer.record(root, upstream=upstream.base_url, api_key_env=KEY_ENV) as proxy,
    ):
        assert _ask(proxy.base_url) == "hi there"
    monkeypatch.delenv(KEY_ENV)  # from here on keyless, the upstream gone
    return root


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


def test_replay_accept_drift_answers_a_changed_request_and_lists_it(recorded_hi: Path) -> None:
    root = recorded_hi

    # Without the flag, the changed prompt is refused (HTTP 422) and the run is not consumed.
    with (
        _proxy("replay", "--root", str(root)) as (url, process),
        pytest.raises(openai.UnprocessableEntityError, match="new messages differ"),
    ):
        _ask(url, "hello")
    assert process.returncode == 1
    assert "the request's new messages differ from the recording" in process.stderr

    # With it, the same request gets the recorded answer, and the report lists the change.
    with _proxy("replay", "--root", str(root), "--accept-drift") as (url, process):
        assert _ask(url, "hello") == "hi there"
        report = httpx.get(url.removesuffix("/v1") + REPORT_PATH).json()
    assert process.returncode == 0, process.stderr
    assert report["ok"] is True
    [accepted] = report["accepted"]
    assert "call 1" in accepted
    assert "hello" in accepted


def test_replay_accept_drift_still_refuses_a_call_the_recording_has_no_answer_for(
    recorded_hi: Path, tmp_path: Path
) -> None:
    root = recorded_hi
    # A drifted request is answered; a call more than recorded has no answer to keep.
    more = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi there"},
        {"role": "user", "content": "and again"},
    ]
    with _proxy("replay", "--root", str(root), "--accept-drift") as (url, process):
        assert _ask(url, "hello") == "hi there"
        with (
            openai.OpenAI(base_url=url, api_key="dummy", max_retries=0) as client,
            pytest.raises(openai.UnprocessableEntityError, match="script-exhausted"),
        ):
            client.chat.completions.create(model="m", messages=more)  # pyright: ignore[reportArgumentType]
    assert process.returncode == 1
    assert "dsh-llm-proxy replay: not consumed:" in process.stderr
    assert "made call 2 but its script has 1 entries" in process.stderr

    # A missing root is a setup error (exit 2) before anything is served; the flag is
    # replay's only.
    missing = [SCRIPT, "replay", "--root", str(tmp_path / "nothing"), "--accept-drift"]
    run = subprocess.run(missing, capture_output=True, text=True, check=False, timeout=60)
    assert run.returncode == 2
    assert run.stderr.startswith("dsh-llm-proxy: ")
    assert "BASE_URL=" not in run.stdout
    record = [SCRIPT, "record", "--root", str(tmp_path / "new"), "--accept-drift"]
    run = subprocess.run(record, capture_output=True, text=True, check=False, timeout=60)
    assert run.returncode == 2
    assert "unrecognized arguments: --accept-drift" in run.stderr

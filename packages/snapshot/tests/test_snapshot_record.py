"""``dsh-snapshot record`` "live" end to end, against a contract server on 127.0.0.1.

The CLI runs as the user runs it (a subprocess, what ``nox -s snapshot_record`` calls), with
the live provider's key variable (a fake key built here) and its base URL pointing at one
:class:`ScriptedModelServer` that answers every scenario through a ``ScriptLibrary`` of the
scenarios' own scripts. Everything runs on copies in tmp; the committed fixtures are only read.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dsh_core.plugins import DEFAULT_MODEL_PROVIDER, model_env_prefixes
from dsh_scripted_server import (
    Fault,
    RecordedRequest,
    ScriptedModelServer,
    ScriptLibrary,
    resolve_profile,
)

_SECONDS = 240

# The live provider these tests record against, played by the scripted server.
PROFILE = DEFAULT_MODEL_PROVIDER
LIVE = resolve_profile(PROFILE)
SERVED_MODELS = LIVE.served_models
# Its variables, named by its settings model.
KEY, BASE_URL, MODEL = (LIVE.env_name(field) for field in ("api_key", "base_url", "model"))


def _fake_key() -> str:
    # Key-shaped on purpose, so the record's scan for the live key has something to miss.
    return "sk-" + secrets.token_hex(16)


def _cli(
    cwd: Path, env: dict[str, str], *args: str, timeout: float = _SECONDS
) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("dsh-snapshot")
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("DSH_", *model_env_prefixes()))
    }
    return subprocess.run(
        [str(exe), *args],
        cwd=cwd,
        env={**base, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _snapshot_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _chat_calls(server: ScriptedModelServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.path.rstrip("/").endswith("/chat/completions")]


class Contract:
    """A library server over a folder, and the environment that points a record run at it."""

    def __init__(self, folder: Path, **server: Any) -> None:
        self.folder = folder
        self.key = _fake_key()
        self.library = ScriptLibrary.from_folder(folder)
        self.server = ScriptedModelServer(
            api_key=self.key, router=self.library.route, strict=True, profile=PROFILE, **server
        )

    def env(self, **extra: str) -> dict[str, str]:
        return {
            KEY: self.key,
            BASE_URL: self.server.base_url,
            LIVE.env_name("retry_base_wait"): "0",
            **extra,
        }

    def record(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return _cli(self.folder.parent, self.env(**extra), "record", str(self.folder), *args)


@pytest.fixture
def contract(tmp_path: Path) -> Iterator[Callable[..., Contract]]:
    made: list[Contract] = []

    def make(folder: Path, **server: Any) -> Contract:
        made.append(Contract(folder, **server))
        made[-1].server.start()
        return made[-1]

    yield make
    for c in made:
        c.server.close()


@pytest.mark.slow
def test_every_committed_scenario_records_live_replays_green_and_refreshes_byte_stable(
    committed: Path, tmp_path: Path, contract: Callable[..., Contract]
) -> None:
    root = tmp_path / "snapshots" / "sdk"
    shutil.copytree(committed, root)
    c = contract(root)
    run = c.record("--jobs", "2")
    print(run.stdout)  # the progress and cost output, for the record
    assert run.returncode == 0, run.stdout + run.stderr
    names = sorted(p.name for p in committed.iterdir() if (p / "input.json").is_file())
    for name in names:
        assert re.search(rf"\[\d+/{len(names)}\] sdk/{name}: ok \(attempt 1\) calls ", run.stdout)
    assert "dsh-snapshot record" in run.stdout
    assert "11 scenarios (11 runs), 21 sessions, 35 model calls made: 11 passed, 0 failed" in (
        run.stdout
    )
    # The preflight came first, once; then only chat calls, every one with the key.
    requests = c.server.requests
    assert requests[0].path.endswith("/models")
    assert sum(r.path.endswith("/models") for r in requests) == 1
    chats = _chat_calls(c.server)
    assert len(chats) == 33  # the two authored scenarios replay their overrides, keylessly
    assert all(r.status == 200 and r.authorized for r in chats), [r.error for r in chats]
    assert {str((r.body or {}).get("model")) for r in chats} == {SERVED_MODELS[0]}
    # Recorded "live", with provenance; the recorded logs are the scripts' own, byte for byte.
    for name in names:
        meta = yaml.safe_load((root / name / "snapshot.yml").read_text())
        if meta["recording"] == "authored":
            assert "provenance" not in meta
            continue
        assert meta["recording"] == "live", name
        assert meta["provenance"]["model"] == SERVED_MODELS[0]
        assert meta["provenance"]["tokens"]["calls"] > 0
        assert meta["expect"], name
        for fixture in (root / name).glob("*.jsonl"):
            assert fixture.read_bytes() == (committed / name / fixture.name).read_bytes()
    listed = _cli(tmp_path, {}, "list", "--max-age", "0", str(root))
    assert listed.returncode == 0, listed.stdout
    assert f"{SERVED_MODELS[0]} " in listed.stdout
    # The new fixtures replay green, and a refresh rewrites not one byte of them.
    before = _snapshot_bytes(root)
    replay = _cli(tmp_path, {}, "replay", "--store", "jsonl", str(root))
    assert replay.returncode == 0, replay.stdout
    refresh = _cli(tmp_path, {}, "refresh", str(root))
    assert refresh.returncode == 0, refresh.stdout
    assert _snapshot_bytes(root) == before


def _one(committed: Path, tmp_path: Path, name: str = "text-turn") -> Path:
    folder = tmp_path / "snapshots" / "sdk" / name
    shutil.copytree(committed / name, folder)
    return folder


def _stopped_at_preflight(
    run: subprocess.CompletedProcess[str], c: Contract, before: dict[str, bytes]
) -> str:
    assert run.returncode == 1, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert len(lines) == 2, run.stdout
    # Before the first request (the preflight), where the key goes.
    assert lines[0].startswith(f"dsh-snapshot record: {KEY} is sent to 127.0.0.1:")
    assert lines[1].startswith("dsh-snapshot record: stopped before any scenario, nothing written")
    assert _chat_calls(c.server) == []
    assert _snapshot_bytes(c.folder) == before
    assert c.key not in run.stdout + run.stderr
    return lines[1]


def test_a_retired_model_stops_at_the_preflight_with_the_served_names(
    committed: Path, tmp_path: Path, contract: Callable[..., Contract]
) -> None:
    folder = _one(committed, tmp_path)
    c = contract(folder.parent)
    before = _snapshot_bytes(folder.parent)
    line = _stopped_at_preflight(c.record(**{MODEL: "deepseek-chat"}), c, before)
    assert "deepseek-chat" in line
    for served in SERVED_MODELS:
        assert served in line


@pytest.mark.parametrize(
    ("server", "env", "fragment"),
    [
        ({}, {KEY: "sk-wrong"}, "401"),
        ({"models_fault": Fault.status(402, message="Insufficient Balance")}, {}, "402"),
        ({}, {BASE_URL: "http://127.0.0.1:9"}, "127.0.0.1:9"),
    ],
    ids=["rejected-key", "no-balance", "unreachable"],
)
def test_a_key_balance_or_endpoint_problem_stops_at_the_preflight(
    committed: Path,
    tmp_path: Path,
    contract: Callable[..., Contract],
    server: dict[str, Any],
    env: dict[str, str],
    fragment: str,
) -> None:
    folder = _one(committed, tmp_path)
    c = contract(folder.parent, **server)
    before = _snapshot_bytes(folder.parent)
    line = _stopped_at_preflight(c.record(**env), c, before)
    assert fragment in line


@pytest.mark.slow  # >= 2.5 s: nox -s tests_slow (the test command's 4-minute budget)
def test_a_503_and_an_empty_completion_are_retried_through_a_record_run(
    committed: Path, tmp_path: Path, contract: Callable[..., Contract]
) -> None:
    folder = _one(committed, tmp_path)
    c = contract(folder.parent)
    empty: list[Any] = [{"type": "finish", "reason": {"kind": "stop"}}]
    c.library.serve_first([Fault.status(503, retry_after=0), empty])
    run = c.record()
    assert run.returncode == 0, run.stdout + run.stderr
    # 503, then the empty completion, then the scripted answer: both failures were retried.
    assert [r.status for r in _chat_calls(c.server)] == [503, 200, 200]
    assert yaml.safe_load((folder / "snapshot.yml").read_text())["recording"] == "live"
    replay = _cli(tmp_path, {}, "replay", "--store", "jsonl", str(folder))
    assert replay.returncode == 0, replay.stdout


def _wrong_answer() -> list[Any]:
    text = "PING"
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def test_a_recording_that_misses_its_expectations_is_made_again(
    committed: Path, tmp_path: Path, contract: Callable[..., Contract]
) -> None:
    folder = _one(committed, tmp_path)
    c = contract(folder.parent)
    c.library.serve_first([_wrong_answer()])
    run = c.record()
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[1/1] sdk/text-turn: missed (attempt 1) calls 1" in run.stdout
    assert "[1/1] sdk/text-turn: ok (attempt 2) calls 1" in run.stdout
    row = next(line for line in run.stdout.splitlines() if line.startswith("│ sdk/text-turn"))
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    assert cells[:4] == ["sdk/text-turn", "live", "pass", "2"]  # both attempts' calls
    assert cells[8] == "1"  # retries
    assert "PING" not in (folder / "session.jsonl").read_text()


def test_a_recording_that_still_misses_fails_and_leaves_the_fixtures_untouched(
    committed: Path, tmp_path: Path, contract: Callable[..., Contract]
) -> None:
    folder = _one(committed, tmp_path)
    c = contract(folder.parent)
    c.library.serve_first([_wrong_answer(), _wrong_answer()])
    before = _snapshot_bytes(folder.parent)
    run = c.record("--retries", "1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert _snapshot_bytes(folder.parent) == before
    out = " ".join(run.stdout.split())
    assert (
        "expectation missed: prompt 1: expected final message matching /\\bPONG\\b/, tools [], "
        "turn end 'completed'; came: final message 'PING'" in out
    )
    assert "still missing its expectations after 2 recordings; the committed fixtures are" in out


def test_a_balance_that_runs_out_mid_run_fails_the_scenario_and_writes_nothing(
    committed: Path, tmp_path: Path, contract: Callable[..., Contract]
) -> None:
    folder = _one(committed, tmp_path)
    c = contract(folder.parent, chat_fault=Fault.status(402, message="Insufficient Balance"))
    before = _snapshot_bytes(folder.parent)
    run = c.record("--retries", "0")
    assert run.returncode == 1, run.stdout + run.stderr
    assert _snapshot_bytes(folder.parent) == before
    assert [r.status for r in _chat_calls(c.server)] == [402]  # 402 is not retried
    out = " ".join(run.stdout.split())
    assert "FAIL sdk/text-turn" in out
    assert "Insufficient Balance" in out
    assert c.key not in run.stdout + run.stderr


def test_a_recording_longer_than_the_run_timeout_fails_in_one_line_naming_it(
    committed: Path, tmp_path: Path, contract: Callable[..., Contract]
) -> None:
    # A slow live model (each wait within --timeout) past the run's whole budget.
    folder = _one(committed, tmp_path)
    c = contract(folder.parent)
    pong: list[Any] = [{"type": "text-delta", "index": 0, "text": "PONG"}]
    c.library.serve_first([Fault.slow_first_byte(3.0, pong)])
    before = _snapshot_bytes(folder.parent)
    run = c.record("--retries", "0", "--timeout", "10", "--run-timeout", "1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert _snapshot_bytes(folder.parent) == before
    lines = [line for line in run.stdout.splitlines() if "--run-timeout" in line]
    assert lines, run.stdout
    assert "the run took longer than --run-timeout (default 3 x --timeout) while waiting" in (
        " ".join(run.stdout.split())
    )


def test_the_pytest_plugin_runs_the_preflight_before_its_first_recording(
    committed: Path, tmp_path: Path, contract: Callable[..., Contract]
) -> None:
    folder = _one(committed, tmp_path)
    c = contract(folder.parent)
    before = _snapshot_bytes(folder.parent)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DSH_", *model_env_prefixes(), "PYTEST_"))
    }
    env |= c.env(DSH_SNAPSHOT="record", **{MODEL: "deepseek-reasoner"})
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--dsh-snapshots",
         str(folder.parent), "--rootdir", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=_SECONDS, check=False,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert "record: stopped before any scenario, nothing written" in run.stdout
    assert "deepseek-reasoner" in run.stdout
    assert _chat_calls(c.server) == []
    assert _snapshot_bytes(folder.parent) == before

"""Modes: record skips without a key and reads .env only then; fixtures are written atomically
and stale children are removed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_core.plugins import DEFAULT_MODEL_PROVIDER, model_env_prefixes, model_provider
from dsh_snapshot import load_scenario, write_fixtures
from dsh_snapshot.cli import record_key

# The key a live recording reads: the default provider's.
[_KEY_VAR] = model_provider(DEFAULT_MODEL_PROVIDER).secret_env_names


def _scenario(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(json.dumps({"steps": [{"op": "initialize"}]}))
    (folder / "snapshot.yml").write_text(
        "version: 1\nprofile: sdk\nstore: default\nrecording: scripted\n"
    )
    return folder


def test_record_without_a_key_skips_with_one_line(tmp_path: Path) -> None:
    folder = _scenario(tmp_path / "sdk" / "x")
    env = {k: v for k, v in os.environ.items() if not k.startswith((*model_env_prefixes(), "DSH_"))}
    exe = Path(sys.executable).with_name("dsh-snapshot")
    proc = subprocess.run(
        [str(exe), "record", str(folder)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"dsh-snapshot record: skipped: no {_KEY_VAR} in the environment or ./.env "
        "(use `dsh-snapshot record --scripted` to record keylessly)"
    ]
    assert sorted(p.name for p in folder.iterdir()) == ["input.json", "snapshot.yml"]


def test_record_reads_dotenv_from_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_KEY_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert record_key() is None
    (tmp_path / ".env").write_text(f"{_KEY_VAR}=from-dotenv-file\n")
    assert record_key() == "from-dotenv-file"


def test_write_fixtures_is_atomic_stable_and_drops_stale_children(tmp_path: Path) -> None:
    folder = _scenario(tmp_path / "sdk" / "x")
    for name in ("session.jsonl", "session.1.jsonl", "session.2.jsonl", "session.3.jsonl"):
        (folder / name).write_text("old\n")
    header: dict[str, Any] = {
        "type": "session",
        "version": 0,
        "id": "{{sessionId}}",
        "createdAt": 0,
    }
    logs: list[list[Any]] = [[header], [{**header, "parentSession": "{{sessionId}}"}]]
    frames: list[Any] = [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    written = write_fixtures(load_scenario(folder), logs, frames, "live")
    assert written == [
        "-session.2.jsonl",
        "-session.3.jsonl",
        "session.1.jsonl",
        "session.jsonl",
        "snapshot.yml",
        "stdout.expected.jsonl",
    ]
    # A scenario that named no loop is recorded with the current one, and now says so.
    assert (folder / "snapshot.yml").read_text() == (
        "version: 1\nprofile: sdk\nstore: default\nrecording: live\nloop: current\n"
    )
    assert (folder / "stdout.expected.jsonl").read_text() == (
        '{"jsonrpc":"2.0","id":1,"result":{}}\n'
    )
    assert sorted(p.name for p in folder.iterdir()) == [
        "input.json",
        "session.1.jsonl",
        "session.jsonl",
        "snapshot.yml",
        "stdout.expected.jsonl",
    ]
    assert write_fixtures(load_scenario(folder), logs, frames, "live") == []

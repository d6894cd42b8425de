"""``dsh-sessions`` over a real PostgreSQL server (``postgres:ROOT``), through its console script.

One temporary server for the module (``dsh_persistence_postgres.testing``, as that package's
own tests use it), in one xdist group so only one worker starts it.
"""

# ruff: noqa: E501  (log rows read best one per line, as a store writes them)

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dsh_persistence_postgres", reason="pip install dsh-persistence-postgres")

from dsh_persistence_postgres.testing import server_for_tests
from dsh_sessions.cli import main

pytestmark = pytest.mark.xdist_group("postgres")

SCRIPT = Path(sys.executable).with_name("dsh-sessions")
SECRET = "pw-" + "x" * 8  # a password the messages must never show

_USER = {"kind": "user"}
_TRIGGER = {"kind": "message", "source": _USER}


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    with server_for_tests() as found:
        # trust authentication ignores the password; it is there to be kept out of messages
        yield f"{found} password={SECRET}"


def _lines(rows: list[dict[str, Any]]) -> str:
    return "".join(
        json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n" for row in rows
    )


def _log(session_id: str, parent: str | None = None) -> str:
    """A log as dsh-py's JSONL store writes it (header keys in its order, seq and time)."""
    header: dict[str, Any] = {"type": "session", "version": 0, "id": session_id}
    header["createdAt"] = 1782000000000 + (1 if parent else 0)
    header["cwd"] = "/w"
    if parent is not None:
        header |= {"parentSession": parent, "seedLength": 1, "origin": "subagent"}
        header["delegationDepth"] = 1
    return _lines([
        header,
        {"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1, "trigger": _TRIGGER}},
        {"type": "user/message", "seq": 1, "time": 6, "data": {"content": [{"type": "text", "text": "héllo 世界"}], "source": _USER}},
        {"type": "x/unknown", "seq": 2, "time": 7, "data": {"b": 1, "a": [None, 2.5]}},
        {"type": "turn/end", "seq": 3, "time": 8, "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ])  # fmt: skip


def run(dsn: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DSH_POSTGRES_DSN": dsn}
    return subprocess.run(
        [str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def _root(path: Path) -> dict[str, str]:
    path.mkdir()
    files = {"parent-1.jsonl": _log("parent-1"), "child-1.jsonl": _log("child-1", "parent-1")}
    for name, text in files.items():
        (path / name).write_text(text, encoding="utf-8")
    return files


def test_jsonl_root_to_postgres_and_back_is_byte_identical(tmp_path: Path, dsn: str) -> None:
    files = _root(tmp_path / "src")
    store = f"postgres:{tmp_path / 'agent-root'}"
    done = run(dsn, "convert", tmp_path / "src", store)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2 sessions: ")

    listed = run(dsn, "ls", store)
    assert listed.returncode == 0, listed.stderr
    assert "2 sessions" in listed.stdout
    assert SECRET not in listed.stdout
    assert [line.split("\t")[:4] for line in listed.stdout.splitlines()[1:]] == [
        ["parent-1", "1782000000000", "-", "4 events"],
        ["child-1", "1782000000001", "parent-1", "4 events"],
    ]
    checked = run(dsn, "check", store)
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.splitlines()[-1].startswith("2 sessions, 0 damaged (postgres:")
    shown = run(dsn, "show", store, "child-1")
    assert shown.returncode == 0
    assert shown.stdout == files["child-1.jsonl"]

    back = run(dsn, "convert", store, tmp_path / "back")
    assert back.returncode == 0, back.stderr
    assert {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "back").iterdir()} == files

    # a namespace that holds sessions is never written into
    again = run(dsn, "convert", tmp_path / "src", store)
    assert again.returncode == 2
    assert "already holds 2 sessions" in again.stderr
    assert SECRET not in again.stderr
    assert run(dsn, "ls", store).stdout == listed.stdout


def test_a_root_with_no_namespace_is_one_line_exit_2_nothing_written(
    tmp_path: Path, dsn: str
) -> None:
    for args in (["ls"], ["convert"]):
        tail = [tmp_path / "out"] if args == ["convert"] else []
        done = run(dsn, *args, f"postgres:{tmp_path / 'never'}", *tail)
        assert done.returncode == 2, (args, done.stdout)
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1
        assert "postgresql://dsh@" in done.stderr
        assert "no such namespace" in done.stderr
        assert SECRET not in done.stderr
    assert not (tmp_path / "out").exists()


def test_an_unreachable_server_is_one_line_naming_it_without_the_password(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = f"host=127.0.0.1 port={port} user=dsh password={SECRET} dbname=db connect_timeout=2"
    _root(tmp_path / "src")
    for args in (
        ["ls", "postgres:/srv/runs"],
        ["convert", "postgres:/srv/runs", tmp_path / "out"],
        ["convert", tmp_path / "src", "postgres:/srv/runs"],
    ):
        done = run(dead, *args)
        assert done.returncode == 2, done.stdout
        assert done.stderr.count("\n") == 1, done.stderr
        assert f"postgresql://dsh@127.0.0.1:{port}/db" in done.stderr
        assert SECRET not in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_header_the_store_cannot_hold_is_refused_before_writing(tmp_path: Path, dsn: str) -> None:
    (tmp_path / "src").mkdir()
    text = _log("odd-1").replace('"cwd":"/w"', '"cwd":"/w","team":"blue"', 1)
    (tmp_path / "src" / "odd-1.jsonl").write_text(text, encoding="utf-8")
    store = f"postgres:{tmp_path / 'odd'}"
    done = run(dsn, "convert", tmp_path / "src", store)
    assert done.returncode == 2
    assert "team" in done.stderr
    assert "nothing was written" in done.stderr
    assert "no such namespace" in run(dsn, "ls", store).stderr


def test_usage_of_the_store_spelling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # refused before any server is asked: in process, no subprocess needed
    assert main(["ls", "postgres:"]) == 2
    assert "name the sessions root" in capsys.readouterr().err
    assert main(["ls", "jsonl:/x"]) == 2
    assert "give /x" in capsys.readouterr().err
    _root(tmp_path / "src")
    assert main(["convert", str(tmp_path / "src"), "postgres:/y", "--to", "sqlite"]) == 2
    assert "--to" in capsys.readouterr().err

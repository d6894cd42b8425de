"""``dsh-sessions`` through its installed console script, over stores of every upstream era.

The upstream-side stores are written here by hand from upstream's documented layouts (the
JSONL ``sessionDir`` / ``JSON.stringify`` lines of ``session-persistence-jsonl/src/format.ts``,
the SQLite DDL of ``session-persistence-sqlite/src/schema.ts`` at June's v3 and the RFC's v4),
never through our writers.
"""

# ruff: noqa: E501  (upstream-shaped rows read best one per line, as upstream writes them)

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_core import read_log_text

SCRIPT = Path(sys.executable).with_name("dsh-sessions")

_USER = {"kind": "user"}
_TRIGGER = {"kind": "message", "source": _USER}


def _stringify(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _lines(rows: list[dict[str, Any]]) -> str:
    return "".join(_stringify(row) + "\n" for row in rows)


def _june_log(session_id: str) -> list[dict[str, Any]]:
    """June / v4-era shape: every event with seq and time."""
    return [
        {"type": "session", "version": 0, "id": session_id, "createdAt": 1782000000000, "cwd": "/w"},
        {"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1, "trigger": _TRIGGER}},
        {"type": "user/message", "seq": 1, "time": 6, "data": {"content": [{"type": "text", "text": "héllo 世界"}], "source": _USER}},
        {"type": "turn/end", "seq": 2, "time": 7, "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]  # fmt: skip


def _head_log(session_id: str, parent: str | None = None) -> list[dict[str, Any]]:
    """HEAD's shape: delegationDepth on every header, rows without seq/time, packed rows,
    surface fields, event types this version does not know."""
    header: dict[str, Any] = {"type": "session", "version": 0, "id": session_id, "createdAt": 1782000000001, "cwd": "/w"}  # fmt: skip
    if parent is not None:
        header |= {"parentSession": parent, "seedLength": 0, "origin": "subagent"}
    header["delegationDepth"] = 0 if parent is None else 1
    return [
        header,
        {"type": "turn/start", "data": {"turn": 1, "trigger": _TRIGGER}},
        {"type": "request/header", "data": {"turn": 1, "step": 1, "model": "m"}},
        {"type": "text-chunks", "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 2], "texts": ["a", "b", "c"]}},
        {"type": "tool-call-chunks", "data": {"turn": 1, "step": 1, "index": 1, "id": "call-1", "name": "bash", "dt": [0], "args": ["{\"command\":", "\"ls\"}"]}},
        {"type": "assistant/message", "data": {"turn": 1, "step": 1, "content": []}, "sourceEventSeqs": [3, 4], "surfaceOp": "append"},
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]  # fmt: skip


def _upstream_root(root: Path) -> dict[Path, str]:
    """A JSONL root in upstream's layout; returns each file's text."""
    bucket = root / f"cwd-{hashlib.sha256(b'/w').hexdigest()[:12]}"
    bucket.mkdir(parents=True)
    (root / "_no-cwd").mkdir()
    files = {
        bucket / "june-1.jsonl": _lines(_june_log("june-1")),
        bucket / "head-1.jsonl": _lines(_head_log("head-1")),
        bucket / "head-2.jsonl": _lines(_head_log("head-2", parent="head-1")),
        root / "_no-cwd" / "june-2.jsonl": _lines(_june_log("june-2")),
    }
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    return files


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def _tree(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


# --- JSONL -----------------------------------------------------------------------------------


def test_upstream_jsonl_root_converts_to_ours_byte_for_byte_and_back(tmp_path: Path) -> None:
    files = _upstream_root(tmp_path / "up")
    before = _tree(tmp_path / "up")
    result = run("convert", tmp_path / "up", tmp_path / "ours")
    assert result.returncode == 0, result.stderr
    assert "4 sessions" in result.stdout
    for path, text in files.items():
        written = tmp_path / "ours" / path.name
        assert written.read_text(encoding="utf-8") == text
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert _tree(tmp_path / "up") == before  # the source is only read
    again = run("convert", tmp_path / "ours", tmp_path / "again")
    assert again.returncode == 0, again.stderr
    assert _tree(tmp_path / "again") == _tree(tmp_path / "ours")


def test_expand_packed_writes_the_chunk_events_core_reads(tmp_path: Path) -> None:
    _upstream_root(tmp_path / "up")
    assert run("convert", tmp_path / "up", tmp_path / "x", "--expand-packed").returncode == 0
    packed = (tmp_path / "up").glob("cwd-*/head-1.jsonl").__next__().read_text()
    expanded = (tmp_path / "x" / "head-1.jsonl").read_text()
    assert "text-chunks" not in expanded
    assert "tool-call-chunks" not in expanded
    assert read_log_text(expanded).events == read_log_text(packed).events
    assert expanded.count('"assistant/chunk"') == 5


def test_ls_show_check_over_an_upstream_root(tmp_path: Path) -> None:
    files = _upstream_root(tmp_path / "up")
    listed = run("ls", tmp_path / "up")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith(f"# {tmp_path / 'up'}: jsonl root, 4 sessions")
    assert {line.split("\t")[0] for line in lines[1:]} == {"june-1", "june-2", "head-1", "head-2"}
    child = next(line for line in lines if line.startswith("head-2\t"))
    assert child.split("\t")[2:4] == ["head-1", "9 events"]  # packed rows count as members
    shown = run("show", tmp_path / "up", "head-2")
    assert shown.stdout == next(text for path, text in files.items() if "head-2" in path.name)
    checked = run("check", tmp_path / "up")
    assert checked.returncode == 0
    assert checked.stdout.splitlines()[-1].startswith("4 sessions, 0 damaged")


def test_check_names_the_damaged_line_and_exits_1(tmp_path: Path) -> None:
    _upstream_root(tmp_path / "up")
    damaged = next((tmp_path / "up").glob("cwd-*/june-1.jsonl"))
    text = damaged.read_text().splitlines(keepends=True)
    damaged.write_text(text[0] + '{"type":"turn/start","seq":0,\n' + "".join(text[2:]))
    result = run("check", tmp_path / "up")
    assert result.returncode == 1
    [line] = [line for line in result.stdout.splitlines() if line.startswith("damaged")]
    assert f"{damaged}:2: invalid JSON" in line
    refused = run("convert", tmp_path / "up", tmp_path / "out")
    assert refused.returncode == 2
    assert str(damaged) in refused.stderr
    assert not (tmp_path / "out").exists()


def test_convert_never_writes_into_an_existing_store(tmp_path: Path) -> None:
    _upstream_root(tmp_path / "up")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("x")
    (tmp_path / "taken.sqlite3").write_bytes(b"")
    for dst in (tmp_path / "busy", tmp_path / "taken.sqlite3"):
        result = run("convert", tmp_path / "up", dst)
        assert result.returncode == 2
        assert str(dst) in result.stderr
        assert "nothing was written" in result.stderr
    assert _tree(tmp_path / "busy") == {"keep.txt": hashlib.sha256(b"x").hexdigest()}
    assert (tmp_path / "taken.sqlite3").read_bytes() == b""


# --- SQLite ----------------------------------------------------------------------------------

_SESSIONS = """CREATE TABLE sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL,
    created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER) STRICT"""
_EVENTS_V3 = """CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, seq INTEGER NOT NULL,
    type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)) STRICT"""
_EVENTS_V4 = _EVENTS_V3.replace(
    "data TEXT NOT NULL,", "data TEXT NOT NULL, source_event_seqs TEXT, surface_op TEXT,"
)


def _upstream_sqlite(path: Path, version: int, application_id: int = 0) -> None:
    """A WAL database as upstream's ``openDatabase`` + ``appendBatch`` leave it."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(_SESSIONS)
        connection.execute(_EVENTS_V3 if version == 3 else _EVENTS_V4)
        connection.execute(f"PRAGMA user_version = {version}")
        if application_id:
            connection.execute(f"PRAGMA application_id = {application_id}")
        for session_id, parent, seed in (("p", None, None), ("c", "p", 3)):
            connection.execute(
                "INSERT INTO sessions VALUES (?, 0, 1782000000000, '/w', ?, ?)",
                (session_id, parent, seed),
            )
            for row in _june_log(session_id)[1:]:
                connection.execute(
                    "INSERT INTO events (session_id, seq, type, time, data) VALUES (?,?,?,?,?)",
                    (session_id, row["seq"], row["type"], row["time"], _stringify(row["data"])),
                )
        if version == 4:
            connection.execute(
                "INSERT INTO events VALUES ('c', 3, 'assistant/text', 8, '{\"t\":1.5}', '[1,2]', "
                '\'{"op":"replace","start":0,"end":2}\')'
            )


def _rows(path: Path) -> list[tuple[Any, ...]]:
    uri = path.resolve().as_uri() + "?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
        return [
            *connection.execute("SELECT * FROM sessions ORDER BY id"),
            *connection.execute("SELECT * FROM events ORDER BY session_id, seq"),
        ]


@pytest.mark.parametrize("version", [3, 4])
def test_upstream_sqlite_is_read_without_a_byte_written(tmp_path: Path, version: int) -> None:
    database = tmp_path / "up.db"
    _upstream_sqlite(database, version)
    before = _tree(tmp_path)
    listed = run("ls", database)
    assert listed.returncode == 0, listed.stderr
    assert f"sqlite v{version}, 2 sessions" in listed.stdout
    shown = run("show", database, "p")
    assert shown.stdout == _lines(_june_log("p"))
    assert run("check", database).returncode == 0
    assert _tree(tmp_path) == before  # no -wal, no -shm, same bytes


def test_upstream_v4_converts_to_v4_row_for_row(tmp_path: Path) -> None:
    database = tmp_path / "up.db"
    _upstream_sqlite(database, 4)
    result = run("convert", database, tmp_path / "copy.db", "--to", "sqlite-v4")
    assert result.returncode == 0, result.stderr
    assert _rows(tmp_path / "copy.db") == _rows(database)
    assert stat.S_IMODE((tmp_path / "copy.db").stat().st_mode) == 0o600


def test_june_v3_converts_to_ours_and_to_jsonl_keeping_every_field(tmp_path: Path) -> None:
    database = tmp_path / "june.db"
    _upstream_sqlite(database, 3)
    assert run("convert", database, tmp_path / "ours.sqlite3").returncode == 0
    assert run("convert", tmp_path / "ours.sqlite3", tmp_path / "logs").returncode == 0
    child = (tmp_path / "logs" / "c.jsonl").read_text()
    assert child.splitlines()[0] == _stringify(
        {"type": "session", "version": 0, "id": "c", "createdAt": 1782000000000, "cwd": "/w",
         "parentSession": "p", "seedLength": 3}
    )  # fmt: skip
    assert child.splitlines()[1:] == _lines(_june_log("c")[1:]).splitlines()


@pytest.mark.parametrize(
    ("to", "version"), [(None, 4), ("sqlite-v4", 4), ("sqlite", 4), ("sqlite-1004", 1004)]
)
def test_sqlite_targets_keep_what_v4_has_no_column_for(
    tmp_path: Path, to: str | None, version: int
) -> None:
    """v4 (the default: upstream's two tables, side tables for the rest) and the former 1004
    layout both keep a child's origin and delegationDepth; the JSONL written back is the same."""
    _upstream_root(tmp_path / "up")
    target = ["--to", to] if to else []
    made = run("convert", tmp_path / "up", tmp_path / "s.db", *target)
    assert made.returncode == 0, made.stderr
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (version,)
    back = run("convert", tmp_path / "s.db", tmp_path / "back", "--to", "jsonl")
    assert back.returncode == 0, back.stderr
    head = (tmp_path / "back" / "head-2.jsonl").read_text().splitlines()[0]
    assert json.loads(head)["delegationDepth"] == 1
    assert json.loads(head)["origin"] == "subagent"


def test_a_1004_store_converts_to_v4_with_nothing_lost(tmp_path: Path) -> None:
    _upstream_root(tmp_path / "up")
    assert (
        run("convert", tmp_path / "up", tmp_path / "old.db", "--to", "sqlite-1004").returncode == 0
    )
    assert run("convert", tmp_path / "old.db", tmp_path / "new.db").returncode == 0
    for name in ("old", "new"):
        assert (
            run("convert", tmp_path / f"{name}.db", tmp_path / name, "--to", "jsonl").returncode
            == 0
        )
    old = {p.name: p.read_bytes() for p in sorted((tmp_path / "old").iterdir())}
    assert old == {p.name: p.read_bytes() for p in sorted((tmp_path / "new").iterdir())}
    assert old  # something was converted


@pytest.mark.parametrize(
    ("version", "application_id", "needle"),
    [
        (2, 0, "schema version 2"),
        (5, 0, "schema version 5"),
        # what was found and what to do (the v17 layout is in no source this build has)
        (17, 0x44534850, "found tables events("),
        (17, 0x44534850, "run `dsh-sessions convert ROOT DST` on that root"),
        (0, 0, "user_version 0"),
    ],
    ids=["v2", "v5", "v17-found", "v17-what-to-do", "unversioned"],
)
def test_an_unknown_version_is_refused_in_one_line_file_unchanged(
    tmp_path: Path, version: int, application_id: int, needle: str
) -> None:
    database = tmp_path / "s.db"
    _upstream_sqlite(database, 4 if version == 0 else version, application_id)
    if version == 0:
        with contextlib.closing(sqlite3.connect(database)) as connection:
            connection.execute("PRAGMA user_version = 0")
    before = _tree(tmp_path)
    # every command refuses the same way; one case runs them all, the others ``ls``
    commands = (["ls"], ["check"], ["show"], ["convert"]) if version == 17 else (["ls"],)
    for command in commands:
        extra = {"show": ["p"], "convert": [tmp_path / "out"]}.get(command[0], [])
        result = run(*command, database, *extra)
        assert result.returncode == 2, command
        [line] = result.stderr.splitlines()
        assert str(database) in line
        assert needle in line
        assert _tree(tmp_path) == before
    assert not (tmp_path / "out").exists()


def test_usage_errors_exit_2_in_one_line() -> None:
    result = run("convert", "only-one")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert os.path.basename(SCRIPT) in result.stderr

"""Our own stores through ``dsh_sessions``: a JSONL root written by ``JsonlSessionStore`` and a
sessions root holding the ``sqlite`` backend's ``sessions.sqlite3`` convert into each other
and back without losing a field or a byte."""

from __future__ import annotations

from pathlib import Path

from dsh_core import CreateOptions, Event, SessionMeta
from dsh_core.testing import synthetic_turn
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_sessions import SQLITE_ROOT_FILE, Target, convert, open_source


def _our_jsonl_root(root: Path) -> dict[str, bytes]:
    store = JsonlSessionStore(root)
    meta = SessionMeta(created_at=5, cwd="/w", parent_session="p", origin="subagent",
                       delegation_depth=1, seed_length=0)  # fmt: skip
    for session_id, options in (
        ("p", CreateOptions("p", meta=SessionMeta(created_at=4, cwd="/w"))),
        ("c", CreateOptions("c", meta=meta)),
    ):
        session = store.create(options)
        for event in synthetic_turn(0, 1):
            session.add(event)
        if session_id == "c":  # an envelope key v4 has no column for (a side table holds it)
            session.add(Event("x/y", session.next_seq, 9, {"k": 1}, extra={"lane": "side"}))
        session.close()
    return {p.name: p.read_bytes() for p in sorted(root.glob("*.jsonl"))}


def test_our_jsonl_root_round_trips_through_our_sqlite_root(tmp_path: Path) -> None:
    original = _our_jsonl_root(tmp_path / "jsonl")
    sqlite_root = tmp_path / "sqlite-root"
    sqlite_root.mkdir()
    convert(open_source(tmp_path / "jsonl"), sqlite_root / SQLITE_ROOT_FILE, Target.SQLITE)
    source = open_source(sqlite_root)  # a sessions root: its database is found
    assert source.kind == "sqlite v4"
    assert sorted(entry.load().log.header.id for entry in source.entries) == ["c", "p"]
    convert(source, tmp_path / "back", Target.JSONL)
    back = {p.name: p.read_bytes() for p in sorted((tmp_path / "back").glob("*.jsonl"))}
    assert back == original

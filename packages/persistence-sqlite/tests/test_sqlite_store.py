"""What the SQLite store promises beyond the shared conformance suite."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dsh_persistence_sqlite
from dsh_core import (
    CreateOptions,
    Event,
    SessionBusyError,
    SessionHeader,
    SessionMeta,
    read_log,
    render_log,
    tool_call,
    turn_start,
)
from dsh_core.testing import synthetic_turn
from dsh_persistence_sqlite import (
    DSH_APPLICATION_ID,
    DSH_SCHEMA_VERSION,
    SCHEMA_VERSION,
    Layout,
    SqliteSessionStore,
)
from dsh_persistence_sqlite._schema import side_table_sql


def test_public_api_is_pinned() -> None:
    assert dsh_persistence_sqlite.__all__ == [
        "SqliteSessionStore",
        "ReadOnlySqliteStore",
        "DSH_APPLICATION_ID",
        "DSH_SCHEMA_VERSION",
        "JUNE_SCHEMA_VERSION",
        "SCHEMA_VERSION",
        "Layout",
    ]
    assert (SCHEMA_VERSION, DSH_SCHEMA_VERSION, DSH_APPLICATION_ID) == (4, 1004, 0x44534859)


@pytest.mark.parametrize("layout", list(Layout))
@pytest.mark.parametrize("existing", [False, True], ids=["absent", "empty-file"])
def test_fresh_file_is_stamped_with_its_layout_and_wal(
    tmp_path: Path, existing: bool, layout: Layout
) -> None:
    path = tmp_path / "nested" / "dir" / "s.sqlite3"
    if existing:
        path.parent.mkdir(parents=True)
        path.touch()
    SqliteSessionStore(path, layout).close()
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA user_version").fetchone() == (layout.version,)
        assert connection.execute("PRAGMA application_id").fetchone() == (layout.application_id,)
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        assert tables == {"sessions", "events"}
    finally:
        connection.close()
    # reopening a stamped store neither fails nor re-stamps, whatever layout is asked for
    other = Layout.V4 if layout is Layout.DSH else Layout.DSH
    with SqliteSessionStore(path, other) as reopened:
        assert reopened.layout is layout


def test_connection_pragmas(tmp_path: Path) -> None:
    with SqliteSessionStore(tmp_path / "s.sqlite3") as store:
        connection = store._conn()
        assert connection.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert connection.execute("PRAGMA trusted_schema").fetchone() == (0,)
        assert connection.execute("PRAGMA foreign_keys").fetchone() == (1,)


@pytest.mark.parametrize(
    ("layout", "set_extra"),
    [
        (Layout.V4, "INSERT INTO dsh_sessions (session_id, extra) VALUES ('x', ?)"),
        (Layout.DSH, "UPDATE sessions SET extra = ? WHERE id = 'x'"),
    ],
)
def test_unknown_header_and_envelope_keys_survive(
    tmp_path: Path, layout: Layout, set_extra: str
) -> None:
    """In the side tables of a v4 file, or the extra columns of the 1004 layout."""
    path = tmp_path / "s.sqlite3"
    header = SessionHeader(
        id="x", created_at=3, seed_length=1, extra={"futureField": {"nested": [1, "два"]}}
    )
    event = Event("future/event", 0, 9, {"k": 1.5}, extra={"lane": "side", "tags": [None]})
    with SqliteSessionStore(path, layout) as store:
        session = store.create(
            CreateOptions(session_id="x", meta=SessionMeta(created_at=3, seed_length=1))
        )
        session.close()
        # the protocol has no way to pass header extras, so put them where a newer writer would
        for statement in side_table_sql() if layout is Layout.V4 else []:
            store._conn().execute(statement)
        store._conn().execute(set_extra, ('{"futureField":{"nested":[1,"два"]}}',))
        resumed = store.resume("x")
        resumed.add(event)
        resumed.close()
    with SqliteSessionStore(path) as store:
        log = store.load("x")
        assert log.header == header
        assert render_log(log.header, log.events) == render_log(header, [event])


def test_export_jsonl_is_the_stored_log_as_written(tmp_path: Path) -> None:
    with SqliteSessionStore(tmp_path / "s.sqlite3") as store:
        seed = synthetic_turn(0, 1)
        session = store.create(
            CreateOptions(session_id="e", seed=seed, meta=SessionMeta(created_at=11, seed_length=3))
        )
        n = session.next_seq
        open_turn = [turn_start(n, 5, 2), tool_call(n + 1, 6, 2, 1, "c", "bash", "{}")]
        for event in open_turn:
            session.add(event)
        session.close()
        text = store.export_jsonl("e")
        assert text == render_log(session.header, [*seed, *open_turn])
        # the export is the raw log: the open turn is closed only in load's view
        parsed = read_log(text.splitlines(), "<export>")
        assert parsed.events[-1].type == "tool/call"
        assert store.load("e").events[-1].type == "turn/end"


def test_writer_in_another_process_excludes_this_one_until_it_dies(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with SqliteSessionStore(path) as store:
        store.create(CreateOptions(session_id="shared")).close()
    holder = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from dsh_persistence_sqlite import SqliteSessionStore
        session = SqliteSessionStore(Path({str(path)!r})).resume("shared")
        print("holding", flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "holding"
        with SqliteSessionStore(path) as store:
            with pytest.raises(SessionBusyError, match="shared"):
                store.resume("shared")
            assert store.load("shared").header.id == "shared"  # readers are never blocked
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.close()
        proc.stdout.close()
    with SqliteSessionStore(path) as store:  # the kernel released the dead writer's lock
        store.resume("shared").close()


def test_lock_names_are_safe_for_any_session_id(tmp_path: Path) -> None:
    ids = ("../escape", "a/b", "x" * 500, "日本")
    with SqliteSessionStore(tmp_path / "s.sqlite3") as store:
        for session_id in ids:
            store.create(CreateOptions(session_id=session_id)).close()
        writers = [store.resume(session_id) for session_id in ids]
        assert {h.id for h in store.list_sessions()} == set(ids)
        locks = list((tmp_path / "s.sqlite3.locks").iterdir())  # one file per held lock
        assert len(locks) == 4
        assert all(p.parent == tmp_path / "s.sqlite3.locks" for p in locks)
        for writer in writers:
            writer.close()
    assert list((tmp_path / "s.sqlite3.locks").iterdir()) == []


def test_closed_writer_and_closed_store_refuse_use(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    session = store.create(CreateOptions(session_id="c"))
    session.close()
    with pytest.raises(ValueError, match="closed"):
        session._writer.append(synthetic_turn(0, 1))
    store.close()
    store.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        store.load("c")


def test_deleting_a_session_row_cascades_to_its_events(tmp_path: Path) -> None:
    with SqliteSessionStore(tmp_path / "s.sqlite3") as store:
        session = store.create(CreateOptions(session_id="d", seed=synthetic_turn(0, 1)))
        session.close()
        connection = store._conn()
        connection.execute("DELETE FROM sessions WHERE id = 'd'")
        assert connection.execute("SELECT count(*) FROM events").fetchone() == (0,)


def test_load_without_sqlite_json_support_decodes_row_by_row(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with SqliteSessionStore(path) as store:
        session = store.create(CreateOptions(session_id="r"))
        written: list[Event] = []
        while len(written) < 2_500:  # more than one fetch chunk
            batch = synthetic_turn(session.next_seq, len(written) + 1)
            for event in batch:
                session.add(event)
            written.extend(batch)
            session.flush()
        session.close()
        fast = store.export_jsonl("r")
        # what the store does when SQLite lacks json_valid(): every row on the per-row path
        store._select_events = store._select_events.replace("json_valid(e.data)", "0")
        assert "json_valid" not in store._select_events
        assert store.export_jsonl("r") == fast == render_log(session.header, written)


def test_loaded_events_keep_their_data_as_text_until_used(tmp_path: Path) -> None:
    # issue 24: a loaded log costs about its size until its events are looked at
    events = synthetic_turn(0, 1)
    with SqliteSessionStore(tmp_path / "s.sqlite3") as store:
        store.create(
            CreateOptions(session_id="s", seed=events, meta=SessionMeta(created_at=1))
        ).close()
        loaded = store.load("s").events
    assert all(getattr(event, "_raw") is not None for event in loaded)  # noqa: B009
    assert loaded == events
    assert all(getattr(event, "_raw") is None for event in loaded)  # noqa: B009

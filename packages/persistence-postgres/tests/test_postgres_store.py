"""What the PostgreSQL store adds to the shared suite: namespaces, the version rule, discard,
damaged rows, following a session, and the registry entry — all on a real server."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from pydantic import ValidationError

from dsh_core import (
    CreateOptions,
    Event,
    LogFormatError,
    SessionBusyError,
    SessionMeta,
    SessionNotFoundError,
    StoreAccessError,
    StoreVersionError,
    dumps_event,
    read_log_text,
)
from dsh_core.plugins import default_store_backend_names, open_store, store_backend, store_run
from dsh_core.testing import synthetic_turn
from dsh_persistence_postgres import SCHEMA_VERSION, PostgresSessionStore, PostgresSettings


def event_lines(events: list[Event]) -> list[str]:
    """Each event as its log line: events compared by the exact bytes a store keeps."""
    return [dumps_event(event) for event in events]


def _write(store: PostgresSessionStore, session_id: str, turns: int = 1) -> list[Event]:
    """A session of ``turns`` whole turns; returns its events."""
    session = store.create(CreateOptions(session_id, meta=SessionMeta(created_at=7)))
    events: list[Event] = []
    for turn in range(1, turns + 1):
        batch = synthetic_turn(session.next_seq, turn)
        for event in batch:
            session.add(event)
        session.flush()
        events.extend(batch)
    session.close()
    return events


def _sql(dsn: str, statement: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as connection:
        cursor = connection.execute(statement, params or None)  # pyright: ignore[reportArgumentType]
        return cursor.fetchall() if cursor.description else []


def test_each_root_is_its_own_namespace(tmp_path: Path, settings: PostgresSettings) -> None:
    team_a = PostgresSessionStore(tmp_path / "a", settings)
    team_b = PostgresSessionStore(tmp_path / "b", settings)
    _write(team_a, "same-id")
    _write(team_b, "same-id", turns=2)
    _write(team_b, "only-b")
    assert [h.id for h in team_a.list_sessions()] == ["same-id"]
    assert [h.id for h in team_b.list_sessions()] == ["only-b", "same-id"]
    assert len(team_a.load("same-id").events) < len(team_b.load("same-id").events)
    with pytest.raises(SessionNotFoundError, match=r"no session only-b in postgresql://"):
        team_a.load("only-b")
    team_b.discard()
    assert team_b.list_sessions() == []
    assert [h.id for h in team_a.list_sessions()] == ["same-id"]  # the other root untouched
    rows = _sql(settings.dsn, "SELECT count(*) FROM dsh.namespaces WHERE root = %s", team_b.root)
    assert rows == [(0,)]


def test_reading_an_unknown_root_writes_nothing(tmp_path: Path, settings: PostgresSettings) -> None:
    store = PostgresSessionStore(tmp_path / "never-written", settings)
    assert store.list_sessions() == []
    with pytest.raises(SessionNotFoundError):
        store.load("x")
    store.discard()  # nothing there: nothing to do
    rows = _sql(settings.dsn, "SELECT count(*) FROM dsh.namespaces WHERE root = %s", store.root)
    assert rows == [(0,)]


def test_another_schema_version_is_refused_and_nothing_written(
    tmp_path: Path, postgres_dsn: str
) -> None:
    schema = f"v_other_{uuid.uuid4().hex[:8]}"  # its own: the server may be shared (CI)
    settings = PostgresSettings(dsn=postgres_dsn, schema_name=schema)
    PostgresSessionStore(tmp_path, settings)  # makes version 1
    _sql(postgres_dsn, f"UPDATE {schema}.schema_version SET version = 2")
    fresh = PostgresSettings(dsn=postgres_dsn, schema_name=schema, pool_max=2)  # a new pool
    with pytest.raises(StoreVersionError) as caught:
        PostgresSessionStore(tmp_path, fresh)
    message = str(caught.value)
    assert f"schema {schema!r} has schema version 2" in message
    assert f"reads schema version {SCHEMA_VERSION} only" in message
    assert "nothing was written" in message
    assert _sql(postgres_dsn, f"SELECT count(*) FROM {schema}.namespaces") == [(0,)]


def test_another_applications_schema_is_refused(tmp_path: Path, postgres_dsn: str) -> None:
    schema = f"alien_{uuid.uuid4().hex[:8]}"
    _sql(postgres_dsn, f"CREATE SCHEMA {schema}; CREATE TABLE {schema}.orders (id int)")
    with pytest.raises(StoreVersionError, match=r"holds tables of another application \(orders\)"):
        PostgresSessionStore(tmp_path, PostgresSettings(dsn=postgres_dsn, schema_name=schema))
    tables = _sql(
        postgres_dsn,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
        schema,
    )
    assert tables == [("orders",)]


@pytest.mark.parametrize(
    ("line", "field", "reason"),
    [
        ('{"type":"turn/start","seq":3,', "events[seq=3]", "invalid JSON"),
        ('{"type":"turn/start","seq":3,"time":1,"data":[]}', "events[seq=3].data", "object data"),
        ('{"type":"turn/start","seq":9,"time":1,"data":{}}', "events[seq=3].seq", "seq gap"),
    ],
)
def test_a_row_edited_by_hand_is_an_error_naming_session_and_seq(
    tmp_path: Path, settings: PostgresSettings, line: str, field: str, reason: str
) -> None:
    store = PostgresSessionStore(tmp_path, settings)
    written = _write(store, "edited", turns=2)
    _sql(
        settings.dsn,
        "UPDATE dsh.events SET line = %s FROM dsh.namespaces n "
        "WHERE n.root = %s AND events.namespace = n.id AND session_id = 'edited' AND seq = 3",
        line,
        store.root,
    )
    for read in (store.load, store.export_jsonl, store.resume):
        with pytest.raises(LogFormatError) as caught:
            read("edited")
        assert caught.value.field == field
        assert reason in caught.value.reason
        assert f"root {store.root} session edited" in str(caught.value)
    # nothing was repaired or cut away: the bad row is still there for a person to see
    rows = _sql(
        settings.dsn,
        "SELECT count(*) FROM dsh.events e JOIN dsh.namespaces n ON e.namespace = n.id "
        "WHERE n.root = %s AND e.session_id = 'edited'",
        store.root,
    )
    assert rows == [(len(written),)]


def test_a_damaged_header_names_the_session(tmp_path: Path, settings: PostgresSettings) -> None:
    store = PostgresSessionStore(tmp_path, settings)
    _write(store, "bad-header")
    _sql(
        settings.dsn,
        'UPDATE dsh.sessions SET header = \'{"type":"session","version":3}\' '
        "WHERE id = 'bad-header'",
    )
    with pytest.raises(LogFormatError) as caught:
        store.load("bad-header")
    assert caught.value.field is not None
    assert caught.value.field.startswith("sessions.header")
    assert "session bad-header" in str(caught.value)
    with pytest.raises(LogFormatError, match="session bad-header"):
        store.list_sessions()


def test_a_reader_follows_a_session_as_it_grows(tmp_path: Path, settings: PostgresSettings) -> None:
    store = PostgresSessionStore(tmp_path, settings)
    seed = synthetic_turn(0, 1)
    session = store.create(CreateOptions("live", seed=seed))
    later: list[list[Event]] = []
    for turn in (2, 3, 4):
        later.append(synthetic_turn(len(seed) + sum(map(len, later)), turn))
    expected = event_lines(seed + [e for batch in later for e in batch])
    # a safety net only: NOTIFY wakes the reader long before; without it the reader stops early
    follower = store.follow("live", idle_timeout=60.0)
    seen = [next(follower) for _ in seed]  # what was stored when following began

    def write() -> None:
        for batch in later:
            for event in batch:
                session.add(event)
            session.flush()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for event in follower:
            seen.append(event)
            if len(seen) == len(expected):
                break
    finally:
        writer.join()
        follower.close()
        session.close()
    assert event_lines(seen) == expected


def test_follow_stops_when_nothing_arrives(tmp_path: Path, settings: PostgresSettings) -> None:
    store = PostgresSessionStore(tmp_path, settings)
    events = _write(store, "quiet")
    assert event_lines(list(store.follow("quiet", idle_timeout=0.2))) == event_lines(events)
    assert list(store.follow("quiet", after=len(events) - 1, idle_timeout=0.2)) == []
    with pytest.raises(SessionNotFoundError):
        next(store.follow("nobody", idle_timeout=0.2))


def test_an_unreachable_server_is_one_sentence_without_the_password(tmp_path: Path) -> None:
    password = "hunter2-" + "x" * 8
    dsn = f"host={tmp_path / 'no-server'} port=1 user=alice dbname=teams password={password}"
    settings = PostgresSettings(dsn=dsn, connect_timeout=1)
    with pytest.raises(StoreAccessError) as caught:
        PostgresSessionStore(tmp_path, settings)
    message = str(caught.value)
    assert message.startswith(f"postgresql://alice@{tmp_path / 'no-server'}:1/teams: ")
    assert password not in message


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("DSH_POSTGRES_SCHEMA", "Bad-Name", "plain lower-case PostgreSQL identifier"),
        ("DSH_POSTGRES_DSN", "host='unclosed", "not a libpq connection string"),
        ("DSH_POSTGRES_POOL_MAX", "0", "greater than or equal to 1"),
    ],
)
def test_bad_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, problem: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=problem):
        PostgresSettings()


def test_the_registry_entry_is_a_server_store(tmp_path: Path, settings: PostgresSettings) -> None:
    backend = store_backend("postgres")
    assert backend.embedded is False
    assert backend.env_prefixes == ("DSH_POSTGRES_", "PG")
    assert backend.settings_model is PostgresSettings
    assert "postgres" not in default_store_backend_names()
    root = tmp_path / "run"
    with store_run("postgres", root):
        store = open_store("postgres", root)  # DSH_POSTGRES_DSN from the environment
        turn = synthetic_turn(0, 1)[:-3]  # an open turn: export must not close it
        session = store.create(CreateOptions("a", meta=SessionMeta(created_at=2, cwd="/w")))
        for event in turn:
            session.add(event)
        session.close()
        [header] = backend.list_sessions(root)
        assert (header.id, header.created_at, header.cwd) == ("a", 2, "/w")
        log = read_log_text(backend.export_log(root, "a"), "export")
        assert event_lines(log.events) == event_lines(turn)
    assert backend.list_sessions(root) == []  # the run's namespace went with the run
    assert not root.exists()  # and nothing was ever written to the filesystem


_HOLDER = """
import sys, time
from pathlib import Path
from dsh_core import CreateOptions
from dsh_persistence_postgres import PostgresSessionStore
store = PostgresSessionStore(Path(sys.argv[1]))  # DSH_POSTGRES_DSN from the environment
session = store.create(CreateOptions("held"))
print("ready", flush=True)
time.sleep(600)
"""


def test_a_writer_in_another_process_holds_the_lock_until_it_dies(
    tmp_path: Path, settings: PostgresSettings
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        store = PostgresSessionStore(tmp_path, settings)
        with pytest.raises(SessionBusyError, match="advisory lock"):
            store.resume("held")
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        # The server ends the dead writer's backend when its socket closes, and the lock with
        # it; how soon is the server's business, so wait a bounded while (not a timing test).
        deadline = time.monotonic() + 60
        while True:
            try:
                session = store.resume("held")
                break
            except SessionBusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        session.close()
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()

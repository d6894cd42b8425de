"""16 writers on 16 sessions and readers at the same time, on one real server: every event
is there once and in order, and a reader never sees a gap or a half batch."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dsh_core import CreateOptions, Event, dumps_event
from dsh_core.testing import synthetic_turn
from dsh_persistence_postgres import PostgresSessionStore, PostgresSettings

WRITERS = 16
TURNS = 12


def _write(root: Path, settings: PostgresSettings, index: int) -> list[str]:
    store = PostgresSessionStore(root, settings)  # a store per writer: as separate processes
    session = store.create(CreateOptions(f"w{index}"))
    written: list[Event] = []
    for turn in range(1, TURNS + 1):
        batch = synthetic_turn(session.next_seq, turn)
        for event in batch:
            session.add(event)
        session.flush()
        written.extend(batch)
    session.close()
    return [dumps_event(event) for event in written]


def _read_until(root: Path, settings: PostgresSettings, done: threading.Event) -> int:
    """Load every session over and over while the writers run; each view must be whole
    turns numbered 0, 1, 2… Returns how many views it checked."""
    store = PostgresSessionStore(root, settings)
    views = 0
    while not done.is_set():
        for header in store.list_sessions():
            events = store.load(header.id).events
            assert [e.seq for e in events] == list(range(len(events)))
            # load closes an open turn with "interrupted": a half batch would show as one
            assert all(
                e.data["reason"]["kind"] != "interrupted" for e in events if e.type == "turn/end"
            )
            views += 1
    return views


def test_sixteen_writers_and_readers_in_parallel(
    tmp_path: Path, settings: PostgresSettings
) -> None:
    root = tmp_path / "shared"
    done = threading.Event()
    with ThreadPoolExecutor(max_workers=WRITERS + 2) as pool:
        readers = [pool.submit(_read_until, root, settings, done) for _ in range(2)]
        writers = [pool.submit(_write, root, settings, n) for n in range(WRITERS)]
        expected = {f"w{n}": writer.result() for n, writer in enumerate(writers)}
        done.set()
        views = [reader.result() for reader in readers]
    assert sum(views) > 0
    store = PostgresSessionStore(root, settings)
    assert sorted(h.id for h in store.list_sessions()) == sorted(expected)
    for session_id, lines in expected.items():
        stored = [dumps_event(event) for event in store.load(session_id).events]
        assert stored == lines, session_id  # every event once, in order, byte for byte

"""The store conformance suite: one set of tests every ``SessionStore`` backend runs.

A backend subclasses :class:`StoreConformance` in its own tests and overrides one fixture,
``store_factory``, returning a callable that opens a *new* store instance over the same
location each time it is called (so the suite can play several processes' worth of stores
against one location)::

    class TestJsonlConformance(StoreConformance):
        @pytest.fixture
        def store_factory(self, tmp_path: Path) -> Callable[[], SessionStore]:
            return lambda: JsonlSessionStore(tmp_path / "sessions")

A backend whose stored tail can be torn by a crash mid-append (a file) also overrides
``tear_tail`` to get the torn-tail tests; for others they are skipped.

This module imports pytest; ``dsh_core.testing`` imports it lazily so non-test code can
use the package without pytest installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core._errors import SeqError, SessionBusyError, SessionExistsError, SessionNotFoundError
from dsh_core._events import Event, SessionHeader
from dsh_core._logformat import dumps_header
from dsh_core._session import CreateOptions, SessionMeta, SessionStore
from dsh_core.testing._eventgen import append_turns, event_lines, synthetic_turn
from dsh_core.testing._recovery_conformance import RecoveryConformance, StoreFactory

__all__ = ["StoreConformance"]

_BIG = 2**53 - 1  # the largest integer every JSON reader keeps exact


def _foreign_events() -> list[Event]:
    """Events of a newer upstream era: unknown types, surface fields, odd data."""
    return [
        Event("session/end-seed", 0, 11, {}),
        Event("request/header", 1, 12, {"model": "x", "nested": {"a": [1, 2.5, None, True]}}),
        Event(
            "user/message",
            2,
            13,
            {"content": [{"type": "text", "text": "surface ✓"}], "source": {"kind": "user"}},
            surface_op="append",
        ),
        Event(
            "assistant/message",
            3,
            14,
            {"turn": 1, "step": 1, "content": []},
            surface_op={"op": "replace", "start": 0, "end": 2},
            source_event_seqs=[0, 1, 2],
        ),
        Event("subagent/descriptor", 4, 0, {"id": "child", "unicode": "日本語 \u2028 \\"}),
    ]


class StoreConformance(RecoveryConformance):
    """Tests every :class:`~dsh_core.SessionStore` backend must pass.

    Subclass it (the class name must start with ``Test``) and override ``store_factory``.
    """

    # --- fixtures ------------------------------------------------------------------------------

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        """Return a callable that opens a NEW store instance over the same location each call."""
        raise NotImplementedError("a backend's conformance test overrides store_factory")

    @pytest.fixture
    def open_store(self, store_factory: StoreFactory) -> Iterator[StoreFactory]:
        """Like ``store_factory``, but every store it opens is closed after the test."""
        opened: list[SessionStore] = []

        def make() -> SessionStore:
            store = store_factory()
            opened.append(store)
            return store

        yield make
        for store in reversed(opened):
            store.close()

    @pytest.fixture
    def store(self, open_store: StoreFactory) -> SessionStore:
        """One store instance."""
        return open_store()

    # --- header --------------------------------------------------------------------------------

    @pytest.mark.parametrize(
        "meta",
        [
            pytest.param(SessionMeta(created_at=1), id="minimal"),
            pytest.param(
                SessionMeta(
                    created_at=1_782_133_845_692,
                    cwd="/tmp/wörk dir",
                    parent_session="parent-1",
                    seed_length=38,
                    origin="subagent",
                    delegation_depth=2,
                ),
                id="every-field",
            ),
            pytest.param(SessionMeta(created_at=5, seed_length=0), id="seedLength-0"),
            pytest.param(SessionMeta(created_at=5, seed_length=None), id="seedLength-absent"),
            pytest.param(
                SessionMeta(created_at=_BIG, seed_length=_BIG, delegation_depth=_BIG),
                id="large-values",
            ),
            pytest.param(
                SessionMeta(created_at=0, cwd="", delegation_depth=0), id="zero-and-empty"
            ),
        ],
    )
    def test_header_round_trip(self, open_store: StoreFactory, meta: SessionMeta) -> None:
        store = open_store()
        session = store.create(CreateOptions(session_id="s1", meta=meta))
        created = session.header
        session.close()
        assert created.created_at == meta.created_at
        assert created.seed_length == meta.seed_length
        for reader in (store, open_store()):
            loaded = reader.load("s1").header
            assert dumps_header(loaded) == dumps_header(created)
            assert loaded == created
            assert [h for h in reader.list_sessions() if h.id == "s1"] == [created]
        if meta.seed_length is None:
            assert "seedLength" not in dumps_header(store.load("s1").header)

    def test_create_without_id_or_created_at_fills_them(self, store: SessionStore) -> None:
        first = store.create(CreateOptions())
        second = store.create(CreateOptions())
        first.close()
        second.close()
        assert first.id != second.id
        assert first.header.created_at < second.header.created_at
        assert store.load(first.id).header == first.header

    # --- create with a seed ----------------------------------------------------------------

    @pytest.mark.parametrize("seed_length", [None, 0, 3, 9])
    def test_create_copies_seed_renumbered_and_keeps_seed_length(
        self, open_store: StoreFactory, seed_length: int | None
    ) -> None:
        seed = synthetic_turn(100, 4)  # numbered from 100 in its parent: renumbered on copy
        store = open_store()
        session = store.create(
            CreateOptions(session_id="child", seed=seed, meta=SessionMeta(seed_length=seed_length))
        )
        assert [e.seq for e in session.events] == list(range(len(seed)))
        assert session.next_seq == len(seed)
        # never inferred from the seed: absent stays absent, a smaller value stays as given
        assert session.header.seed_length == seed_length
        session.close()
        loaded = open_store().load("child")
        assert loaded.header.seed_length == seed_length
        assert event_lines(loaded.events) == event_lines(
            [e.with_seq(i) for i, e in enumerate(seed)]
        )
        assert [e.type for e in loaded.events] == [e.type for e in seed]

    def test_create_with_empty_seed_and_seed_length(self, store: SessionStore) -> None:
        session = store.create(CreateOptions(session_id="e", meta=SessionMeta(seed_length=7)))
        session.close()
        loaded = store.load("e")
        assert loaded.events == []
        assert loaded.header.seed_length == 7

    def test_create_existing_id_is_refused_and_original_untouched(
        self, open_store: StoreFactory
    ) -> None:
        store = open_store()
        session = store.create(CreateOptions(session_id="dup", meta=SessionMeta(created_at=10)))
        append_turns(session, 2)
        session.close()
        before = store.load("dup")
        for creator in (store, open_store()):
            with pytest.raises(SessionExistsError, match="dup"):
                creator.create(
                    CreateOptions(
                        session_id="dup", seed=synthetic_turn(0, 1), meta=SessionMeta(created_at=99)
                    )
                )
        after = open_store().load("dup")
        assert after.header == before.header
        assert event_lines(after.events) == event_lines(before.events)

    def test_create_existing_id_while_open_is_refused(self, open_store: StoreFactory) -> None:
        session = open_store().create(CreateOptions(session_id="busy-dup"))
        append_turns(session, 1)
        with pytest.raises((SessionExistsError, SessionBusyError), match="busy-dup"):
            open_store().create(CreateOptions(session_id="busy-dup"))
        append_turns(session, 1, first_turn=2)
        session.close()
        assert len(open_store().load("busy-dup").events) == session.next_seq

    # --- resume --------------------------------------------------------------------------------

    def test_resume_preserves_created_at_and_seed_length_and_continues_seq(
        self, open_store: StoreFactory
    ) -> None:
        seed = synthetic_turn(0, 1)
        meta = SessionMeta(
            created_at=123_456,
            seed_length=len(seed) - 2,
            cwd="/w",
            parent_session="p",
            origin="subagent",
            delegation_depth=1,
        )
        session = open_store().create(CreateOptions(session_id="r", seed=seed, meta=meta))
        header = session.header
        first = append_turns(session, 2, first_turn=2)
        session.close()

        resumed = open_store().resume("r")
        assert resumed.header == header
        assert dumps_header(resumed.header) == dumps_header(header)
        assert resumed.next_seq == len(seed) + len(first)
        assert event_lines(resumed.events) == event_lines([*seed, *first])
        more = append_turns(resumed, 1, first_turn=4)
        resumed.close()

        loaded = open_store().load("r")
        assert loaded.header == header
        assert loaded.header.seed_length == len(seed) - 2  # not len(seed), not len(events)
        assert event_lines(loaded.events) == event_lines([*seed, *first, *more])

    def test_resume_without_seed_length_keeps_it_absent(self, open_store: StoreFactory) -> None:
        session = open_store().create(CreateOptions(session_id="a", seed=synthetic_turn(0, 1)))
        session.close()
        resumed = open_store().resume("a")
        resumed.close()
        assert resumed.header.seed_length is None
        assert open_store().load("a").header.seed_length is None

    def test_record_and_resume_many_times(self, open_store: StoreFactory) -> None:
        session = open_store().create(CreateOptions(session_id="m"))
        expected: list[Event] = []
        session.close()
        for turn in range(1, 6):
            session = open_store().resume("m")
            assert event_lines(session.events) == event_lines(expected)
            event = session.record("note/custom", {"turn": turn}, time=turn)
            expected.append(event)
            expected.extend(append_turns(session, 1, first_turn=turn))
            session.close()
        assert event_lines(open_store().load("m").events) == event_lines(expected)

    # --- append / load ----------------------------------------------------------------------

    def test_append_load_equality_over_thousands_of_events(self, open_store: StoreFactory) -> None:
        store = open_store()
        session = store.create(CreateOptions(session_id="big", meta=SessionMeta(created_at=1)))
        written: list[Event] = []
        turn = 1
        while len(written) < 5_000:
            written.extend(append_turns(session, 1, first_turn=turn))
            turn += 1
        session.close()
        expected = event_lines(written)
        assert event_lines(store.load("big").events) == expected
        assert event_lines(open_store().load("big").events) == expected

    def test_foreign_event_shapes_round_trip(self, open_store: StoreFactory) -> None:
        store = open_store()
        session = store.create(CreateOptions(session_id="f", seed=_foreign_events()))
        tail = [e.with_seq(session.next_seq + i) for i, e in enumerate(_foreign_events())]
        for event in tail:
            session.add(event)
        session.close()
        loaded = open_store().load("f")
        assert event_lines(loaded.events) == event_lines([*_foreign_events(), *tail])
        assert loaded.events[3].surface_op == {"op": "replace", "start": 0, "end": 2}
        assert loaded.events[3].source_event_seqs == [0, 1, 2]
        assert loaded.events[2].surface_op == "append"

    def test_batch_that_does_not_continue_the_log_is_refused(
        self, open_store: StoreFactory
    ) -> None:
        store = open_store()
        session = store.create(CreateOptions(session_id="gap"))
        stored = append_turns(session, 2)
        writer = session._writer
        n = len(stored)
        for first in (n + 1, n - 1, 0, n + 100):
            with pytest.raises(SeqError):
                writer.append(synthetic_turn(first, 9))
        assert event_lines(open_store().load("gap").events) == event_lines(stored)
        # the writer is still usable with the right seq
        good = synthetic_turn(n, 3)
        writer.append(good)
        session.close()
        assert event_lines(open_store().load("gap").events) == event_lines([*stored, *good])

    def test_non_contiguous_batch_is_refused_whole(self, open_store: StoreFactory) -> None:
        session = open_store().create(CreateOptions(session_id="nc"))
        stored = append_turns(session, 1)
        n = len(stored)
        batch = synthetic_turn(n, 2)
        batch[5] = batch[5].with_seq(batch[5].seq + 1)  # a hole inside the batch
        with pytest.raises(SeqError):
            session._writer.append(batch)
        duplicated = synthetic_turn(n, 2)
        duplicated[3] = duplicated[3].with_seq(duplicated[2].seq)
        with pytest.raises(SeqError):
            session._writer.append(duplicated)
        session.close()
        assert event_lines(open_store().load("nc").events) == event_lines(stored)

    def test_seed_with_unordered_seqs_is_renumbered(self, store: SessionStore) -> None:
        seed = [e.with_seq(50 - i) for i, e in enumerate(synthetic_turn(0, 1))]
        session = store.create(CreateOptions(session_id="u", seed=seed))
        session.close()
        assert [e.seq for e in store.load("u").events] == list(range(len(seed)))

    # --- writers ---------------------------------------------------------------------------------

    def test_second_writer_is_refused_and_nothing_is_corrupted(
        self, open_store: StoreFactory
    ) -> None:
        first_store, second_store = open_store(), open_store()
        session = first_store.create(CreateOptions(session_id="w"))
        written = append_turns(session, 2)
        with pytest.raises(SessionBusyError, match="w"):
            second_store.resume("w")
        with pytest.raises(SessionBusyError, match="w"):
            first_store.resume("w")  # the same store instance is no exception
        written += append_turns(session, 2, first_turn=3)  # the first keeps working
        assert event_lines(second_store.load("w").events) == event_lines(written)  # load while open
        session.close()
        session.close()  # idempotent

        resumed = second_store.resume("w")  # after close the second can resume
        assert event_lines(resumed.events) == event_lines(written)
        written += append_turns(resumed, 1, first_turn=5)
        with pytest.raises(SessionBusyError):
            first_store.resume("w")
        resumed.close()
        assert event_lines(open_store().load("w").events) == event_lines(written)

    def test_writers_on_different_sessions_do_not_interfere(self, open_store: StoreFactory) -> None:
        a = open_store().create(CreateOptions(session_id="a"))
        b = open_store().create(CreateOptions(session_id="b"))
        wa = append_turns(a, 2)
        wb = append_turns(b, 3)
        wa += append_turns(a, 1, first_turn=3)
        a.close()
        b.close()
        reader = open_store()
        assert event_lines(reader.load("a").events) == event_lines(wa)
        assert event_lines(reader.load("b").events) == event_lines(wb)

    # --- missing -----------------------------------------------------------------------------

    def test_unknown_session_is_not_found(self, store: SessionStore) -> None:
        with pytest.raises(SessionNotFoundError, match="nope"):
            store.load("nope")
        with pytest.raises(SessionNotFoundError, match="nope"):
            store.resume("nope")
        assert store.list_sessions() == []

    # --- listing -------------------------------------------------------------------------------

    def test_listing_is_ordered_by_created_at_then_id(self, open_store: StoreFactory) -> None:
        store = open_store()
        specs = [("c", 30), ("b", 10), ("a", 30), ("z", 5), ("y", 10), ("x", 30)]
        for session_id, created in specs:
            store.create(
                CreateOptions(session_id=session_id, meta=SessionMeta(created_at=created))
            ).close()
        expected = sorted(specs, key=lambda s: (s[1], s[0]))
        for reader in (store, open_store()):
            listed = reader.list_sessions()
            assert [(h.id, h.created_at) for h in listed] == expected
            assert all(isinstance(h, SessionHeader) for h in listed)

    def test_listing_includes_sessions_open_for_writing(self, open_store: StoreFactory) -> None:
        session = open_store().create(
            CreateOptions(session_id="open", meta=SessionMeta(seed_length=2))
        )
        listed = open_store().list_sessions()
        session.close()
        assert listed == [session.header]

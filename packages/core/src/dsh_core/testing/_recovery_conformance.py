"""The crash-recovery half of the store conformance suite: open turns and torn tails.

A crash leaves a log in one of two states a store must recover from: a turn left open (the
view closes it without writing; a resume persists the closers) or, for a store that appends to
a file, a torn last line (cut on load, repaired on resume). :class:`StoreConformance` inherits
these tests; they rely on its ``open_store`` fixture.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsh_core._events import Event, step_start, tool_call, tool_result, turn_start
from dsh_core._logformat import SessionLog, dumps_event
from dsh_core._session import CreateOptions, Session, SessionStore
from dsh_core.testing._eventgen import append_turns, event_lines, event_time, synthetic_turn

__all__ = ["RecoveryConformance", "StoreFactory"]

StoreFactory = Callable[[], SessionStore]


class RecoveryConformance:
    """How a store recovers what a crash left: open turns and (for file stores) torn tails."""

    @pytest.fixture
    def tear_tail(self) -> Callable[[str, bytes], None] | None:
        """Override to damage a session's stored tail as a crash in the middle of an append
        would: ``tear(session_id, partial_line)`` leaves ``partial_line`` (no newline) after
        the last stored event. ``None`` (the default) means the backend cannot be torn
        (each append is one transaction), and the torn-tail tests are skipped."""
        return None

    # --- open turns --------------------------------------------------------------------------

    @staticmethod
    def _open_turn(session: Session) -> list[Event]:
        """Append a complete turn, then a turn left open at a pending tool call."""
        done = append_turns(session, 1)
        n = session.next_seq
        open_part = [
            turn_start(n, event_time(n), 2),
            step_start(n + 1, event_time(n + 1), 2, 1),
            tool_call(n + 2, event_time(n + 2), 2, 1, "call-a", "bash", "{}"),
            tool_call(n + 3, event_time(n + 3), 2, 1, "call-b", "read", "{}"),
            tool_result(n + 4, event_time(n + 4), 2, 1, "call-a", "ok", False),
        ]
        for event in open_part:
            session.add(event)
        session.flush()
        return [*done, *open_part]

    @staticmethod
    def _assert_closed_view(log: SessionLog, stored: list[Event]) -> None:
        n = len(stored)
        assert event_lines(log.events[:n]) == event_lines(stored)
        closers = log.events[n:]
        assert [e.type for e in closers] == ["tool/result", "step/end", "turn/end"]
        assert [e.seq for e in closers] == [n, n + 1, n + 2]
        assert closers[0].data["callId"] == "call-b"
        assert closers[0].data["isError"] is True
        assert closers[1].data == {"turn": 2, "step": 1}
        assert closers[2].data == {"turn": 2, "reason": {"kind": "interrupted"}}

    def test_load_closes_an_open_turn_in_the_view_without_writing(
        self, open_store: StoreFactory
    ) -> None:
        session = open_store().create(CreateOptions(session_id="o"))
        stored = self._open_turn(session)
        # the writer is still open: if load wrote its closers, this writer's next batch
        # would no longer continue the log
        self._assert_closed_view(open_store().load("o"), stored)
        self._assert_closed_view(open_store().load("o"), stored)
        n = session.next_seq
        rest = [tool_result(n, event_time(n), 2, 1, "call-b", "real", False)]
        for event in rest:
            session.add(event)
        session.close()
        # closed without a turn/end: still open, so the view closes it again
        view = open_store().load("o")
        assert event_lines(view.events[: n + 1]) == event_lines([*stored, *rest])
        assert [e.type for e in view.events[n + 1 :]] == ["step/end", "turn/end"]

    def test_resume_persists_the_closers(self, open_store: StoreFactory) -> None:
        session = open_store().create(CreateOptions(session_id="p"))
        stored = self._open_turn(session)
        session.close()
        resumed = open_store().resume("p")
        self._assert_closed_view(SessionLog(resumed.header, list(resumed.events)), stored)
        closers = list(resumed.events[len(stored) :])
        assert resumed.next_seq == len(stored) + 3
        more = append_turns(resumed, 1, first_turn=3)
        resumed.close()
        loaded = open_store().load("p")
        assert event_lines(loaded.events) == event_lines([*stored, *closers, *more])
        # a second resume finds nothing to close
        again = open_store().resume("p")
        again.close()
        assert event_lines(again.events) == event_lines(loaded.events)

    def test_load_of_completed_log_adds_nothing(self, open_store: StoreFactory) -> None:
        session = open_store().create(CreateOptions(session_id="done"))
        written = append_turns(session, 2)
        session.close()
        assert event_lines(open_store().load("done").events) == event_lines(written)
        resumed = open_store().resume("done")
        resumed.close()
        assert event_lines(resumed.events) == event_lines(written)

    # --- torn tails ----------------------------------------------------------------------------

    @pytest.mark.parametrize("ends_open", [False, True], ids=["after-turn-end", "mid-turn"])
    def test_torn_tail_is_cut_on_load_and_repaired_on_resume(
        self,
        open_store: StoreFactory,
        tear_tail: Callable[[str, bytes], None] | None,
        ends_open: bool,
    ) -> None:
        if tear_tail is None:
            pytest.skip("this backend commits each append as a transaction: no torn tails")
        session = open_store().create(CreateOptions(session_id="torn"))
        stored = self._open_turn(session) if ends_open else append_turns(session, 2)
        session.close()
        n = len(stored)
        partial = dumps_event(synthetic_turn(n, 7)[0])
        tear_tail("torn", partial[: len(partial) // 2].encode("utf-8"))

        view = open_store().load("torn")
        if ends_open:
            self._assert_closed_view(view, stored)
        else:
            assert event_lines(view.events) == event_lines(stored)
        again = open_store().load("torn").events  # closers may carry the time of the load
        assert [(e.type, e.seq, e.data) for e in again] == [
            (e.type, e.seq, e.data) for e in view.events
        ]

        resumed = open_store().resume("torn")
        assert [e.type for e in resumed.events[n:]] == [e.type for e in view.events[n:]]
        more = append_turns(resumed, 1, first_turn=8)
        resumed.close()
        loaded = open_store().load("torn")
        assert event_lines(loaded.events) == event_lines(resumed.events)
        assert event_lines(loaded.events[len(loaded.events) - len(more) :]) == event_lines(more)

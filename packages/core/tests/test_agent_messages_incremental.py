"""The conversation sent to the model is kept incrementally: each step converts only the events
added since the last, and the result is always what a full rebuild gives."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dsh_core import Agent, AgentConfig, CreateOptions, Event, SessionMeta, messages_from_events
from dsh_core._messages import session_messages
from dsh_core.testing import InMemorySessionStore, ScriptedModel, synthetic_turn, text_chunks


def _store_with_turns(turns: int) -> tuple[InMemorySessionStore, str]:
    store = InMemorySessionStore()
    session = store.create(CreateOptions(meta=SessionMeta(cwd="/tmp")))
    seq = 0
    for turn in range(1, turns + 1):
        events = synthetic_turn(seq, turn)
        for event in events:
            session.add(event)
        seq += len(events)
    session.close()
    return store, session.id


def test_every_step_sees_exactly_what_a_rebuild_gives(tmp_path: Path) -> None:
    # Five turns in one session: each request's messages equal messages_from_events of the
    # log as it stood, and later steps never change what an earlier request was sent.
    store = InMemorySessionStore()
    model = ScriptedModel([[text_chunks(f"answer {i}") for i in range(5)]])
    agent = Agent(model, store, [], AgentConfig(profile="june"))
    session = store.create(CreateOptions(meta=SessionMeta(cwd=str(tmp_path))))
    sent: list[list[object]] = []

    async def turns() -> None:
        for i in range(5):
            await agent.run_turn(session, f"prompt {i}")
            sent.append(list(model.requests[-1].messages))

    asyncio.run(turns())
    assert [len(r.messages) for r in model.requests] == [1, 3, 5, 7, 9]
    for request, seen in zip(model.requests, sent, strict=True):
        assert request.messages == seen  # not grown by the later steps
    assert session_messages(session) == messages_from_events(session.events)
    assert model.requests[-1].messages == messages_from_events(session.events)[:-1]


def test_each_call_returns_a_new_list() -> None:
    store, session_id = _store_with_turns(2)
    session = store.resume(session_id)
    first = session_messages(session)
    first.append({"role": "user", "content": []})
    assert session_messages(session) == messages_from_events(session.events)
    assert session_messages(session) is not session_messages(session)
    session.close()


def test_a_resumed_session_is_converted_from_its_own_log() -> None:
    # Resume builds a new Session over a new list: nothing of the old one's view is reused.
    store, session_id = _store_with_turns(2)
    before = store.resume(session_id)
    assert session_messages(before) == messages_from_events(before.events)
    before.close()
    after = store.resume(session_id)
    seq = after.next_seq
    for event in synthetic_turn(seq, 3):
        after.add(event)
    assert session_messages(after) == messages_from_events(after.events)
    after.close()


def test_a_log_that_changed_under_the_view_is_converted_again() -> None:
    # The view trusts only an append-only log: a replaced last event or a shorter log
    # (nothing in dsh does either) makes it start over rather than serve stale messages.
    store, session_id = _store_with_turns(1)
    session = store.resume(session_id)
    assert session_messages(session) == messages_from_events(session.events)
    events = session._events  # pyright: ignore[reportPrivateUsage]
    last = events[-1]
    events[-1] = Event("user/message", last.seq, 0, {"content": [{"type": "text", "text": "x"}]})
    assert session_messages(session) == messages_from_events(events)
    assert session_messages(session)[-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "x"}],
    }
    del events[-2:]
    assert session_messages(session) == messages_from_events(events)
    session.close()

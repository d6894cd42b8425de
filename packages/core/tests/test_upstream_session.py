"""Upstream's ``core/session/tests/session.spec.ts`` and ``properties.spec.ts`` (June 2026) as
conformance cases for our session: message derivation (:func:`dsh_core.messages_from_events`),
seeding, headers. Ledger: COMPATIBILITY.md § "Upstream unit tests".

Our tool results are ``tool`` messages (the model client's wire shape), where upstream's are
user messages carrying a ``tool-result`` block; the cases check the same facts in our shape.
Upstream's property tests (fast-check) run here over seeded random logs.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from dsh_core import (
    FORMAT_VERSION,
    CreateOptions,
    Event,
    SeqError,
    Session,
    SessionExistsError,
    SessionMeta,
    messages_from_events,
    read_log,
    render_log,
)
from dsh_core.testing import InMemorySessionStore

_USER = {"kind": "user"}
_START = {"turn": 1, "trigger": {"kind": "message", "source": _USER}}


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _session(store: InMemorySessionStore, *events: tuple[str, dict[str, Any]]) -> Session:
    session = store.create(CreateOptions())
    for kind, data in events:
        session.record(kind, data)
    return session


# describe('Session')
def test_derives_message_history_from_the_event_log() -> None:
    session = _session(
        InMemorySessionStore(),
        ("turn/start", _START),
        ("user/message", {"content": _text("hello"), "source": _USER}),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0}}),
        (
            "assistant/message",
            {
                "turn": 1,
                "step": 1,
                "content": [
                    *_text("let me check"),
                    {"type": "tool-call", "id": "c1", "name": "echo", "arguments": "{}"},
                ],
            },
        ),
        (
            "tool/result",
            {"turn": 1, "step": 1, "callId": "c1", "content": _text("ok"), "isError": False},
        ),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    )
    messages = messages_from_events(session.events)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert len(messages[1]["content"]) == 2  # raw chunks do not appear in derived history
    assert messages[2] == {"role": "tool", "callId": "c1", "content": _text("ok"), "isError": False}


def test_a_max_tokens_turn_end_reason_round_trips() -> None:
    store = InMemorySessionStore()
    session = _session(
        store, ("turn/start", _START), ("turn/end", {"turn": 1, "reason": {"kind": "max-tokens"}})
    )
    session.close()
    log = store.load(session.id)
    reread = read_log(render_log(log.header, log.events).splitlines())
    assert reread.events[-1].data["reason"] == {"kind": "max-tokens"}


def test_context_and_steering_messages_are_tagged_synthetic_user_content() -> None:
    events = [
        Event(
            "context/message",
            0,
            1,
            {"content": _text("file changed: a.ts"), "source": {"kind": "plugin", "plugin": "w"}},
        ),
        Event("steering/message", 1, 2, {"turn": 1, "content": _text("focus"), "source": _USER}),
    ]
    context, steering = messages_from_events(events)
    assert context == {
        "role": "user",
        "content": [
            *_text('<context source="plugin">'),
            *_text("file changed: a.ts"),
            *_text("</context>"),
        ],
    }
    assert steering["role"] == "user"
    assert steering["content"][0] == {"type": "text", "text": '<steering source="user">'}
    assert steering["content"][-1] == {"type": "text", "text": "</steering>"}


def test_replays_identically_from_a_seeded_event_log() -> None:
    store = InMemorySessionStore()
    original = _session(
        store,
        ("user/message", {"content": _text("q"), "source": _USER}),
        ("assistant/message", {"turn": 1, "step": 1, "content": _text("a")}),
    )
    replayed = store.create(CreateOptions("s3-replay", seed=list(original.events)))
    assert messages_from_events(replayed.events) == messages_from_events(original.events)
    assert replayed.next_seq == original.next_seq


def test_mutating_a_derived_message_leaves_the_log_unchanged() -> None:
    session = _session(
        InMemorySessionStore(),
        ("user/message", {"content": _text("original"), "source": _USER}),
        (
            "tool/result",
            {"turn": 1, "step": 1, "callId": "c1", "content": _text("out"), "isError": False},
        ),
        ("assistant/message", {"turn": 1, "step": 1, "content": _text("a")}),
    )
    before = copy.deepcopy(list(session.events))
    messages: list[Any] = messages_from_events(session.events)
    messages[0]["content"][0]["text"] = "HACKED"
    messages[1]["content"].append({"type": "text", "text": "injected"})
    messages[2]["content"][0]["text"] = "HACKED"
    messages[0]["content"].append({"type": "text", "text": "extra"})
    assert list(session.events) == before
    assert messages_from_events(session.events)[0]["content"] == _text("original")


def test_dense_arrays_and_nested_plain_objects_are_accepted() -> None:
    session = _session(
        InMemorySessionStore(),
        (
            "user/message",
            {"content": _text("x"), "source": _USER, "extra": [1, 2, [3, {"a": None, "b": True}]]},
        ),
    )
    assert len(session.events) == 1


def _seed(*seqs: int) -> list[Event]:
    kinds = ["turn/start", "user/message", "turn/end"]
    datas: list[dict[str, Any]] = [
        _START,
        {"content": _text("hi"), "source": _USER},
        {"turn": 1, "reason": {"kind": "completed"}},
    ]
    return [Event(kinds[i], seq, i + 1, datas[i]) for i, seq in enumerate(seqs)]


def test_a_session_refuses_seed_events_whose_seq_is_not_contiguous() -> None:
    store = InMemorySessionStore()
    opened = store.create(CreateOptions("h"))
    opened.close()
    with pytest.raises(SeqError, match="seq"):
        Session(opened.header, _seed(0, 5), store._open_writer("h"))  # pyright: ignore[reportPrivateUsage]


def test_a_well_formed_contiguous_seed_is_accepted() -> None:
    session = InMemorySessionStore().create(CreateOptions("seed-ok", seed=_seed(0, 1, 2)))
    assert len(session.events) == 3


# describe('SessionStore')
def test_duplicate_ids_are_refused_and_a_seeded_fork_derives_the_same_history() -> None:
    store = InMemorySessionStore()
    first = store.create(CreateOptions("fixed"))
    with pytest.raises(SessionExistsError, match="already exists"):
        store.create(CreateOptions("fixed"))
    first.record("user/message", {"content": _text("q"), "source": _USER})
    forked = store.create(CreateOptions("fork", seed=list(first.events)))
    assert messages_from_events(forked.events) == messages_from_events(first.events)


def test_a_bare_session_gets_a_minimal_current_version_header() -> None:
    header = InMemorySessionStore().create(CreateOptions("plain")).header
    assert (header.version, header.id) == (FORMAT_VERSION, "plain")
    assert isinstance(header.created_at, int)
    assert header.cwd is None
    assert header.parent_session is None


def test_cwd_and_parent_session_from_meta_reach_the_header() -> None:
    meta = SessionMeta(cwd="/proj/project", parent_session="parent")
    header = InMemorySessionStore().create(CreateOptions("child", meta=meta)).header
    assert (header.version, header.id, header.cwd, header.parent_session) == (
        FORMAT_VERSION,
        "child",
        "/proj/project",
        "parent",
    )


# describe('Session properties'): upstream's fast-check arbitraries, drawn from a seeded RNG
def _message_event(rng: random.Random) -> tuple[str, dict[str, Any]]:
    content = [{"type": "text", "text": rng.choice(["", "a", "ü", "x y"])}] * rng.randint(0, 3)
    choice = rng.randrange(4)
    if choice == 0:
        return "user/message", {"content": content, "source": _USER}
    if choice == 1:
        return "assistant/message", {"turn": 1, "step": 1, "content": content}
    if choice == 2:
        usage = {"inputTokens": 1, "outputTokens": 1}
        return "assistant/message", {"turn": 1, "step": 1, "content": content, "usage": usage}
    call = {"callId": f"c{rng.randrange(9)}", "content": content, "isError": rng.random() < 0.5}
    return "tool/result", {"turn": 1, "step": 1, **call}


def _noise_event(rng: random.Random) -> tuple[str, dict[str, Any]]:
    return rng.choice(
        [
            ("turn/start", _START),
            ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
            ("step/start", {"turn": 1, "step": 1}),
            ("step/end", {"turn": 1, "step": 1}),
            (
                "assistant/chunk",
                {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "t"}},
            ),
        ]
    )


def _any_log(rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    pick = [_message_event, _noise_event]
    return [rng.choice(pick)(rng) for _ in range(rng.randint(0, 25))]


_RUNS = 100


@pytest.mark.parametrize(
    "prop",
    [
        "deriveMessages is deterministic",
        "seq is strictly monotonic and zero-based contiguous",
        "replay-from-seed reproduces the derivation identically",
        "every derived message has a known role and decoupled content",
    ],
)
def test_session_log_properties(prop: str) -> None:
    rng = random.Random(f"upstream-session-{prop}")
    for _ in range(_RUNS):
        events = _any_log(rng)
        store = InMemorySessionStore()
        session = _session(store, *events)
        derived = messages_from_events(session.events)
        if prop.startswith("deriveMessages"):
            assert derived == messages_from_events(session.events)
        elif prop.startswith("seq"):
            assert [e.seq for e in session.events] == list(range(len(events)))
            assert session.next_seq == len(events)
        elif prop.startswith("replay"):
            replayed = store.create(CreateOptions(seed=list(session.events)))
            assert messages_from_events(replayed.events) == derived
            assert replayed.next_seq == session.next_seq
        else:
            before = copy.deepcopy(list(session.events))
            for message in derived:
                assert message["role"] in {"user", "assistant", "tool"}
                message["content"].append({"type": "text", "text": "mutation"})  # pyright: ignore[reportArgumentType]
            assert list(session.events) == before


def test_non_message_events_never_affect_derived_history() -> None:
    rng = random.Random("upstream-session-noise")
    for _ in range(_RUNS):
        messages = [_message_event(rng) for _ in range(rng.randint(0, 12))]
        noise = [_noise_event(rng) for _ in range(rng.randint(0, 12))]
        merged: list[tuple[str, dict[str, Any]]] = []
        queue_m, queue_n = list(messages), list(noise)
        while queue_m or queue_n:  # a random interleaving keeping each stream's order
            take_noise = bool(queue_n) and (not queue_m or rng.random() < 0.5)
            merged.append((queue_n if take_noise else queue_m).pop(0))
        clean = messages_from_events(_session(InMemorySessionStore(), *messages).events)
        noisy = messages_from_events(_session(InMemorySessionStore(), *merged).events)
        assert noisy == clean

"""Upstream's ``session-persistence/tests/persistence.spec.ts`` (June 2026), its
``assertSerializable`` cases, against both stores: event data JSON cannot hold is refused at the
store's boundary naming the event's type and seq, and nothing is written. Ledger:
COMPATIBILITY.md § "Upstream unit tests"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_core import CreateOptions, Event, SessionStore
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_persistence_sqlite import SqliteSessionStore

_STORES: dict[str, Callable[[Path], SessionStore]] = {
    "jsonl": lambda root: JsonlSessionStore(root / "sessions"),
    "sqlite": lambda root: SqliteSessionStore(root / "sessions.db"),
}
_TURN_START = {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}


@pytest.mark.parametrize("kind", sorted(_STORES))
def test_accepts_json_serializable_event_data(tmp_path: Path, kind: str) -> None:
    store = _STORES[kind](tmp_path)
    session = store.create(CreateOptions("ok"))
    data = {"content": [{"type": "text", "text": "ü\n"}], "n": 1.5, "none": None, "ok": True}
    session.add(Event("user/message", 0, 1, data))
    session.close()
    assert store.load("ok").events == [Event("user/message", 0, 1, data)]
    store.close()


@pytest.mark.parametrize("kind", sorted(_STORES))
@pytest.mark.parametrize(
    "value",
    [object(), float("nan"), float("inf"), {1, 2}],
    ids=["object", "nan", "infinity", "set"],
)
def test_rejects_non_json_event_data_with_type_and_seq(
    tmp_path: Path, kind: str, value: Any
) -> None:
    store = _STORES[kind](tmp_path)
    session = store.create(CreateOptions("bad"))
    session.add(Event("turn/start", 0, 1, _TURN_START))
    session.flush()
    session.add(Event("user/message", 1, 2, {"content": value}))
    with pytest.raises(ValueError, match=r"'user/message' at seq 1 .*not JSON"):
        session.flush()
    # the refused batch wrote nothing: the stored log is the one good event
    stored = store.load("bad").events
    assert [(e.seq, e.type) for e in stored] == [(0, "turn/start"), (1, "turn/end")]
    assert stored[1].data["reason"] == {"kind": "interrupted"}  # a closer in the view only
    with pytest.raises(ValueError, match="not JSON"):
        session.close()  # the refused event is still pending; closing does not drop it silently
    store.close()


# session.spec.ts 'validates seed events: rejects a non-JSON-serializable seed': a fork or
# replay seed meets the same boundary as an append, and no session is left behind
@pytest.mark.parametrize("kind", sorted(_STORES))
def test_a_non_json_seed_is_refused_and_no_session_created(tmp_path: Path, kind: str) -> None:
    store = _STORES[kind](tmp_path)
    seed = [Event("user/message", 0, 1, {"content": [], "bad": float("nan")})]
    with pytest.raises(ValueError, match=r"'user/message' at seq 0 .*not JSON"):
        store.create(CreateOptions("seed-bad", seed=seed))
    assert store.list_sessions() == []
    store.create(CreateOptions("seed-bad")).close()  # the id was not taken by the refusal
    store.close()

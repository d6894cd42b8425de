"""Upstream's ``session-persistence-jsonl/tests/jsonl.spec.ts`` (June 2026) as conformance cases
for :class:`JsonlSessionStore`: the crash-tail scan (``scanLog``), crash recovery, committed
bytes never rewritten, re-appends refused, hostile ids. Ledger: COMPATIBILITY.md § "Upstream
unit tests"."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    CreateOptions,
    Event,
    LogFormatError,
    SeqError,
    SessionMeta,
    StoreAccessError,
)
from dsh_persistence_jsonl import JsonlSessionStore

_START = {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}


def _line(kind: str, seq: int, **data: Any) -> str:
    return json.dumps({"type": kind, "seq": seq, "time": seq + 1, "data": data})


def _header(session_id: str) -> str:
    return json.dumps({"type": "session", "version": 0, "id": session_id, "createdAt": 1})


def _store_with(tmp_path: Path, session_id: str, text: str) -> JsonlSessionStore:
    store = JsonlSessionStore(tmp_path)
    (tmp_path / f"{session_id}.jsonl").write_text(text)
    return store


@pytest.mark.parametrize(
    ("case", "text", "match"),
    [
        ("rejects a header-less / empty log", "", "header"),
        ("rejects a corrupt header line", "not json\n", "line 1|:1:"),
        ("rejects a non-session first line", '{"type":"event"}\n', ":1:"),
        (
            "rejects a seq gap BEFORE a later committed turn/end",
            "\n".join(
                [
                    _header("g"),
                    _line("turn/start", 0, **_START),
                    _line("step/start", 2, turn=1, step=1),
                    _line("turn/end", 3, turn=1, reason={"kind": "completed"}),
                ]
            )
            + "\n",
            "seq",
        ),
        (
            "rejects a corrupt line BEFORE a later committed turn/end",
            "\n".join(
                [
                    _header("g"),
                    "{not json",
                    _line("turn/end", 1, turn=1, reason={"kind": "completed"}),
                ]
            )
            + "\n",
            ":2:",
        ),
    ],
)
def test_damage_in_the_committed_region_is_refused_and_the_file_untouched(
    tmp_path: Path, case: str, text: str, match: str
) -> None:
    store = _store_with(tmp_path, "g", text)
    with pytest.raises(LogFormatError, match=match):
        store.load("g")
    assert (tmp_path / "g.jsonl").read_text() == text, case


@pytest.mark.parametrize(
    ("case", "lines", "kept"),
    [
        (
            "a seq gap after the last turn/end bounds the preserved tail",
            [_line("turn/start", 0, **_START), _line("step/start", 2, turn=1, step=1)],
            [0],
        ),
        ("a header-only log preserves nothing", [], []),
        (
            "a corrupt line after the last turn/end bounds the preserved tail",
            [_line("turn/start", 0, **_START), "{not json"],
            [0],
        ),
        (
            "tolerates a seq gap AFTER a turn/end (uncommitted tail)",
            [
                _line("turn/start", 0, **_START),
                _line("turn/end", 1, turn=1, reason={"kind": "completed"}),
                _line("step/start", 9, turn=2, step=1),
            ],
            [0, 1],
        ),
    ],
)
def test_the_crash_tail_is_cut_and_the_open_turn_closed(
    tmp_path: Path, case: str, lines: list[str], kept: list[int]
) -> None:
    store = _store_with(tmp_path, "t", "\n".join([_header("t"), *lines]) + "\n")
    events = store.load("t").events
    original = [e.seq for e in events if e.time != 0 and e.seq in kept]
    assert original == kept, case
    opened = any(
        json.loads(line).get("type") == "turn/start" for line in lines[:1] if line[0] == "{"
    )
    closed = bool(kept) and events[len(kept) - 1].type == "turn/end"
    if opened and not closed:
        assert events[len(kept)].type == "turn/end"
        assert events[len(kept)].data["reason"] == {"kind": "interrupted"}
    else:
        assert len(events) == len(kept)


# describe('durability and crash semantics')
def _recorded(store: JsonlSessionStore, session_id: str, *, finish: bool) -> None:
    session = store.create(CreateOptions(session_id, meta=SessionMeta(cwd="/w")))
    events = [
        Event("turn/start", 0, 1, _START),
        Event("turn/end", 1, 2, {"turn": 1, "reason": {"kind": "completed"}}),
        Event("turn/start", 2, 3, _START | {"turn": 2}),
        Event("step/start", 3, 4, {"turn": 2, "step": 1}),
    ]
    for event in events if not finish else events[:2]:
        session.add(event)
    session.close()


def test_round_trip_is_byte_identical(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path)
    _recorded(store, "rt", finish=True)
    before = (tmp_path / "rt.jsonl").read_bytes()
    log = store.load("rt")
    assert [e.seq for e in log.events] == [0, 1]
    assert (tmp_path / "rt.jsonl").read_bytes() == before


def test_crash_recovery_keeps_the_interrupted_turn_and_closes_it(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path)
    _recorded(store, "cr", finish=False)
    path = tmp_path / "cr.jsonl"
    committed = path.read_bytes()
    with path.open("ab") as f:
        f.write(b'{"type":"assistant/chunk","seq":4,"ti')  # a torn, newline-less fragment
    types = [e.type for e in store.load("cr").events]
    assert types == ["turn/start", "turn/end", "turn/start", "step/start", "step/end", "turn/end"]
    session = store.resume("cr")
    session.close()
    # Committed events are never rewritten: only the crash tail is replaced by the closers.
    assert path.read_bytes().startswith(committed)
    assert store.load("cr").events[-1].data["reason"] == {"kind": "interrupted"}


def test_a_re_append_of_a_stored_seq_is_refused(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path)
    session = store.create(CreateOptions("re"))
    session.add(Event("turn/start", 0, 1, _START))
    with pytest.raises(SeqError):
        session.add(Event("turn/start", 0, 1, _START))
    session.close()
    assert [e.seq for e in store.load("re").events] == [0, 1]  # 1: the closer of the open turn


@pytest.mark.parametrize("hostile", ["../escape", "a/b", "/abs", ".."])
def test_path_traversal_ids_cannot_escape_the_root(tmp_path: Path, hostile: str) -> None:
    store = JsonlSessionStore(tmp_path / "root")
    with pytest.raises(ValueError, match="session id"):
        store.create(CreateOptions(hostile))
    assert list(tmp_path.iterdir()) == [tmp_path / "root"]


def _one_turn(session_id: str, store: JsonlSessionStore) -> Any:
    session = store.create(CreateOptions(session_id, meta=SessionMeta(cwd="/w")))
    session.add(Event("turn/start", 0, 1, _START))
    session.add(Event("turn/end", 1, 2, {"turn": 1, "reason": {"kind": "completed"}}))
    session.flush()
    return session


def test_a_failed_append_truncates_its_partial_bytes_so_a_retry_has_no_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # upstream simulates ENOSPC from the fsync after the bytes are written; so do we, once
    store = JsonlSessionStore(tmp_path)
    session = _one_turn("truncate-retry", store)
    path = tmp_path / "truncate-retry.jsonl"
    size_before = path.stat().st_size
    real_fsync = os.fsync
    failures = [OSError(errno.ENOSPC, "simulated fsync ENOSPC")]

    def failing_fsync(fd: int) -> None:
        if failures:
            raise failures.pop()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    session.add(Event("turn/start", 2, 9, _START | {"turn": 2}))
    session.add(Event("turn/end", 3, 10, {"turn": 2, "reason": {"kind": "completed"}}))
    with pytest.raises(OSError, match="ENOSPC"):
        session.flush()
    assert path.stat().st_size == size_before
    session.flush()  # the batch stayed pending (no silent loss); the retry continues at seq 2
    session.close()
    assert [e.seq for e in store.load("truncate-retry").events] == [0, 1, 2, 3]


# describe('SessionPersistenceJsonl: edge cases')
def test_list_on_an_empty_root_returns_nothing(tmp_path: Path) -> None:
    assert JsonlSessionStore(tmp_path).list_sessions() == []


def test_list_returns_nothing_when_the_root_does_not_exist_yet(tmp_path: Path) -> None:
    assert JsonlSessionStore(tmp_path / "does-not-exist-yet").list_sessions() == []


def test_a_root_that_is_a_file_is_an_error_not_an_empty_listing(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("x")
    with pytest.raises(StoreAccessError, match="not a directory"):
        JsonlSessionStore(tmp_path / "not-a-dir").list_sessions()


def test_list_reads_a_header_line_longer_than_a_read_chunk(tmp_path: Path) -> None:
    header = {"type": "session", "version": 0, "id": "big", "createdAt": 1, "pad": "x" * 9000}
    (tmp_path / "big.jsonl").write_text(json.dumps(header) + "\n")
    assert [h.id for h in JsonlSessionStore(tmp_path).list_sessions()] == ["big"]


def _circular() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


@pytest.mark.parametrize(
    "extra",
    [len, _circular(), float("inf"), {1, 2}, b"bytes"],
    ids=["function", "circular", "infinity", "set", "bytes"],
)
def test_non_json_event_data_is_refused_and_never_stored(tmp_path: Path, extra: Any) -> None:
    store = JsonlSessionStore(tmp_path)
    session = store.create(CreateOptions("serial"))
    message = {"content": [{"type": "text", "text": "x"}], "source": {"kind": "user"}}
    session.add(Event("user/message", 0, 1, message | {"extra": extra}))
    with pytest.raises(ValueError, match="'user/message' at seq 0 carries data that is not JSON"):
        session.flush()
    assert store.load("serial").events == []


def test_well_formed_json_values_are_stored(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path)
    session = store.create(CreateOptions("json-ok"))
    data = {
        "content": [{"type": "text", "text": "x"}],
        "source": {"kind": "user"},
        "extra": {"a": None, "b": True, "c": [1, 2, {"d": "nested"}]},
    }
    session.add(Event("user/message", 0, 1, data))
    session.close()
    assert "json-ok" in [h.id for h in store.list_sessions()]
    assert store.load("json-ok").events == [Event("user/message", 0, 1, data)]

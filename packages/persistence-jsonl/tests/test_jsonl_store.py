"""What the JSONL store does beyond the shared suite: the file layout, torn-tail repair,
the writer's check against the file on disk, ids as file names."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_core import (
    CreateOptions,
    Event,
    LogFormatError,
    SeqError,
    SessionBusyError,
    SessionExistsError,
    SessionIdError,
    SessionMeta,
    StoreAccessError,
    StoreCorruptError,
    dumps_event,
    read_log_bytes,
    render_log,
    step_start,
    tool_call,
    turn_start,
)
from dsh_core.testing import event_time, synthetic_turn
from dsh_persistence_jsonl import JsonlSessionStore, check_session_id


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


def _write_turns(store: JsonlSessionStore, session_id: str, turns: int) -> list[Event]:
    session = store.create(CreateOptions(session_id=session_id, meta=SessionMeta(created_at=7)))
    written: list[Event] = []
    for turn in range(1, turns + 1):
        for event in synthetic_turn(session.next_seq, turn):
            written.append(session.add(event))
        session.flush()
    session.close()
    return written


def _open_turn_tail(first: int) -> list[Event]:
    return [
        turn_start(first, event_time(first), 9),
        step_start(first + 1, event_time(first + 1), 9, 1),
        tool_call(first + 2, event_time(first + 2), 9, 1, "c1", "bash", "{}"),
    ]


# --- layout -------------------------------------------------------------------------------


def test_file_is_exactly_the_rendered_log(root: Path) -> None:
    store = JsonlSessionStore(root)
    seed = synthetic_turn(0, 1)
    session = store.create(
        CreateOptions(session_id="s", seed=seed, meta=SessionMeta(created_at=3, seed_length=2))
    )
    more = synthetic_turn(session.next_seq, 2)
    for event in more:
        session.add(event)
    session.close()
    assert (root / "s.jsonl").read_text("utf-8") == render_log(session.header, [*seed, *more])
    assert sorted(p.name for p in root.iterdir()) == ["s.jsonl"]  # the lock went with its writer


def test_root_is_created_and_foreign_files_are_ignored(root: Path) -> None:
    store = JsonlSessionStore(root / "deeper")
    _write_turns(store, "a", 1)
    (root / "deeper" / "notes.txt").write_text("x")
    (root / "deeper" / ".hidden.jsonl").write_text("not a log")
    (root / "deeper" / "dir.jsonl").mkdir()
    assert [h.id for h in store.list_sessions()] == ["a"]


def test_unknown_header_keys_and_envelope_keys_survive_load_and_resume(root: Path) -> None:
    root.mkdir()
    header = {"type": "session", "version": 0, "id": "x", "createdAt": 5, "futureKey": [1]}
    rows = [
        {"type": "future/event", "seq": 0, "time": 1, "data": {"a": 1}, "envelopeKey": "kept"},
        {"type": "turn/end", "seq": 1, "time": 2, "data": {"turn": 1, "reason": {"kind": "x"}}},
    ]
    text = "\n".join(json.dumps(r, separators=(",", ":")) for r in [header, *rows]) + "\n"
    (root / "x.jsonl").write_text(text)
    store = JsonlSessionStore(root)
    log = store.load("x")
    assert log.header.extra == {"futureKey": [1]}
    assert log.events[0].extra == {"envelopeKey": "kept"}
    session = store.resume("x")
    session.record("note", {"n": 1}, time=3)
    session.close()
    after = (root / "x.jsonl").read_text()
    assert after.startswith(text)  # the store never rewrites what is stored
    assert store.list_sessions()[0].extra == {"futureKey": [1]}


def test_header_id_must_match_the_file_name(root: Path) -> None:
    store = JsonlSessionStore(root)
    _write_turns(store, "a", 1)
    os.rename(root / "a.jsonl", root / "b.jsonl")
    before = _sha(root / "b.jsonl")
    for call in (lambda: store.load("b"), lambda: store.resume("b"), store.list_sessions):
        with pytest.raises(LogFormatError, match="'a'") as caught:
            call()
        assert (caught.value.line, caught.value.field) == (1, "id")
    assert _sha(root / "b.jsonl") == before


# --- session ids ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "../escape",
        "a/b",
        "a\\b",
        ".hidden",
        "nul\0byte",
        "sp ace",
        "x" * 201,
        "tab\there",
        "\x7f",
    ],
)
def test_unsafe_session_ids_are_refused_before_touching_disk(root: Path, bad: str) -> None:
    store = JsonlSessionStore(root)
    with pytest.raises(ValueError, match="cannot be stored as a file"):
        check_session_id(bad)
    if bad:  # an empty id in CreateOptions means "generate one"
        with pytest.raises(ValueError, match="cannot be stored as a file"):
            store.create(CreateOptions(session_id=bad))
    for call in (store.load, store.resume):
        with pytest.raises(ValueError, match="cannot be stored as a file"):
            call(bad)
    assert list(root.iterdir()) == []
    assert not (root.parent / "escape.jsonl").exists()


def test_generated_and_uuid_ids_are_safe() -> None:
    assert check_session_id("906f1eac-a457-4eb9-828b-1ba537552524")
    assert check_session_id("crash-1_2.3@x+y=z")
    assert check_session_id("{{sessionId}}")  # the placeholder in upstream recordings
    assert check_session_id("日本")


# --- torn tails ----------------------------------------------------------------------------

TORN_TAILS = {
    "partial-json-no-newline": b'{"type":"step/start","seq":',
    "whole-json-no-newline": None,  # filled in by the test: the next event without "\n"
    "unparsable-final-line": b'{"type":"step/start","se\n',
    "cut-inside-utf8": '{"type":"user/message","data":{"t":"é'.encode()[:-1],
    "zero-bytes": b"\0" * 64,
    "zero-bytes-line": b"\0" * 16 + b"\n",
}


@pytest.mark.parametrize("ends_open", [False, True], ids=["after-turn-end", "mid-turn"])
@pytest.mark.parametrize("tail_id", list(TORN_TAILS))
def test_torn_tail_is_cut_in_the_view_and_repaired_on_resume(
    root: Path, tail_id: str, ends_open: bool
) -> None:
    store = JsonlSessionStore(root)
    good = _write_turns(store, "t", 2)
    path = root / "t.jsonl"
    if ends_open:
        session = store.resume("t")
        for event in _open_turn_tail(session.next_seq):
            good.append(session.add(event))
        session.close()
    clean = path.read_bytes()
    tail = TORN_TAILS[tail_id]
    if tail is None:
        tail = dumps_event(synthetic_turn(len(good), 3)[0]).encode()
    with path.open("ab") as f:
        f.write(tail)
    torn = _sha(path)

    view = store.load("t")
    assert _sha(path) == torn  # load writes nothing
    assert [dumps_event(e) for e in view.events[: len(good)]] == [dumps_event(e) for e in good]
    closers = [e.type for e in view.events[len(good) :]]
    assert closers == (["tool/result", "step/end", "turn/end"] if ends_open else [])

    session = store.resume("t")
    session.close()
    repaired = path.read_bytes()
    assert repaired.startswith(clean)
    assert [dumps_event(e) for e in read_log_bytes(repaired, "t").events] == [
        dumps_event(e) for e in session.events
    ]
    assert [e.type for e in session.events[len(good) :]] == closers
    assert [dumps_event(e) for e in store.load("t").events] == [
        dumps_event(e) for e in session.events
    ]


def test_unparsable_line_before_the_last_is_corruption_not_a_torn_tail(root: Path) -> None:
    store = JsonlSessionStore(root)
    _write_turns(store, "c", 1)
    path = root / "c.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3][:10]  # damage line 4, keep the rest
    path.write_bytes(b"\n".join(lines))
    before = _sha(path)
    for call in (lambda: store.load("c"), lambda: store.resume("c")):
        with pytest.raises(LogFormatError) as caught:
            call()
        assert (caught.value.source, caught.value.line) == (str(path), 4)
    assert _sha(path) == before


def test_torn_header_is_not_repaired(root: Path) -> None:
    root.mkdir()
    path = root / "h.jsonl"
    path.write_bytes(b'{"type":"session","version":0,"id":"h","createdAt":1')
    with pytest.raises(LogFormatError) as caught:
        JsonlSessionStore(root).resume("h")
    assert caught.value.line == 1
    assert path.read_bytes().endswith(b"1")


# --- the writer against the file on disk ----------------------------------------------------


def test_writer_judges_a_batch_against_the_file_not_memory(root: Path) -> None:
    store = JsonlSessionStore(root)
    session = store.create(CreateOptions(session_id="w"))
    first = synthetic_turn(0, 1)
    session._writer.append(first)
    # another process appends around the lock (a bug elsewhere); the writer must notice
    intruder = synthetic_turn(len(first), 2)
    with (root / "w.jsonl").open("ab") as f:
        f.write("".join(dumps_event(e) + "\n" for e in intruder).encode())
    with pytest.raises(SeqError, match=str(len(first) + len(intruder))):
        session._writer.append(synthetic_turn(len(first), 3))
    after = synthetic_turn(len(first) + len(intruder), 3)
    session._writer.append(after)
    session._writer.close()
    assert [dumps_event(e) for e in store.load("w").events] == [
        dumps_event(e) for e in [*first, *intruder, *after]
    ]


def test_writer_refuses_a_file_torn_under_it(root: Path) -> None:
    store = JsonlSessionStore(root)
    session = store.create(CreateOptions(session_id="w"))
    with (root / "w.jsonl").open("ab") as f:
        f.write(b'{"type":"x"')
    before = _sha(root / "w.jsonl")
    with pytest.raises(StoreCorruptError, match="partial line"):
        session._writer.append(synthetic_turn(0, 1))
    assert _sha(root / "w.jsonl") == before
    session._writer.close()


def test_writer_refuses_a_replaced_or_removed_file(root: Path) -> None:
    store = JsonlSessionStore(root)
    session = store.create(CreateOptions(session_id="w"))
    path = root / "w.jsonl"
    data = path.read_bytes()
    path.unlink()
    with pytest.raises(StoreCorruptError, match="removed"):
        session._writer.append(synthetic_turn(0, 1))
    path.write_bytes(data)
    with pytest.raises(StoreCorruptError, match="replaced"):
        session._writer.append(synthetic_turn(0, 1))
    assert path.read_bytes() == data
    session._writer.close()


def test_closed_writer_refuses_appends(root: Path) -> None:
    session = JsonlSessionStore(root).create(CreateOptions(session_id="z"))
    session.close()
    with pytest.raises(ValueError, match="closed"):
        session._writer.append(synthetic_turn(0, 1))


def test_empty_batch_writes_nothing(root: Path) -> None:
    store = JsonlSessionStore(root)
    session = store.create(CreateOptions(session_id="e"))
    before = _sha(root / "e.jsonl")
    session._writer.append([])
    session.close()
    assert _sha(root / "e.jsonl") == before


# --- writers and creation ------------------------------------------------------------------


def test_busy_error_names_the_session_and_its_file(root: Path) -> None:
    session = JsonlSessionStore(root).create(CreateOptions(session_id="b"))
    with pytest.raises(SessionBusyError) as caught:
        JsonlSessionStore(root).resume("b")
    assert "b" in str(caught.value)
    assert str(root / "b.jsonl") in str(caught.value)
    session.close()


def test_stale_temp_files_are_ignored_and_cleaned_when_the_store_opens(root: Path) -> None:
    root.mkdir()
    stale = root / ".s.0123abcd.tmp"
    stale.write_bytes(b'{"type":"session","version":0,"id":"s","createdAt":1}\n{"type":')
    store = JsonlSessionStore(root)
    assert not stale.exists()
    assert store.list_sessions() == []
    store.create(CreateOptions(session_id="s")).close()
    assert not stale.exists()
    assert [h.id for h in store.list_sessions()] == ["s"]


def test_a_writer_in_another_process_excludes_this_one_until_it_dies(root: Path) -> None:
    # the crash harness's writer creates the session, fills it to 40 events, then holds it
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsh_core.testing._crash_writer",
            "dsh_persistence_jsonl:JsonlSessionStore",
            str(root),
            "held",
            "40",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    assert proc.stdout is not None
    try:
        lines: list[str] = []
        while not lines or lines[-1] != "full":
            line = proc.stdout.readline()
            assert line, f"the writer exited early after {lines}"
            lines.append(line.decode().strip())
        store = JsonlSessionStore(root)
        before = _sha(root / "held.jsonl")
        with pytest.raises(SessionBusyError, match="held"):
            store.resume("held")
        with pytest.raises(SessionExistsError, match="held"):
            store.create(CreateOptions(session_id="held"))
        held = store.load("held")  # reading is never blocked
        assert held.events[-1].type == "turn/end"
        assert _sha(root / "held.jsonl") == before
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert (root / ".held.lock").exists()  # a killed writer cannot remove its lock file
    store = JsonlSessionStore(root)  # opening sweeps it: nobody holds it any more
    assert not (root / ".held.lock").exists()
    resumed = store.resume("held")  # the kernel dropped the dead writer's lock
    resumed.close()
    assert [dumps_event(e) for e in resumed.events] == [dumps_event(e) for e in held.events]


def test_opening_sweeps_leftovers_of_any_id_but_never_a_live_writers(root: Path) -> None:
    live = JsonlSessionStore(root).create(CreateOptions(session_id="live"))
    hexa = "0123456789abcdef" * 2
    leftovers = [f".other.{hexa}.tmp", f".x.y.{hexa}.tmp", ".dead.lock", f".dead.{hexa}.tmp"]
    kept = [".live.lock", f".live.{hexa}.tmp", ".not-ours.tmp", ".config", "notes.txt"]
    for name in [*leftovers, *kept[1:]]:
        (root / name).write_text("x")
    (root / ".dir.lock").mkdir()  # not a file: left alone
    JsonlSessionStore(root)
    names = sorted(p.name for p in root.iterdir())
    assert names == sorted([*kept, ".dir.lock", "live.jsonl"])
    live.close()
    JsonlSessionStore(root)
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [".not-ours.tmp", ".config", "notes.txt", ".dir.lock", "live.jsonl"]
    )


def test_lock_files_do_not_pile_up(root: Path) -> None:
    store = JsonlSessionStore(root)
    for n in range(5):
        store.create(CreateOptions(session_id=f"s{n}")).close()
        store.resume(f"s{n}").close()
    assert sorted(p.name for p in root.iterdir()) == [f"s{n}.jsonl" for n in range(5)]


def test_a_root_that_is_a_file_or_a_lock_that_is_a_directory_is_a_typed_error(
    tmp_path: Path,
) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(StoreAccessError, match="not a directory") as error:
        JsonlSessionStore(a_file)
    assert error.value.path == str(a_file)
    root = tmp_path / "root"
    store = JsonlSessionStore(root)
    (root / ".s.lock").mkdir()
    with pytest.raises(StoreAccessError, match=r"\.s\.lock: cannot open the writer lock"):
        store.create(CreateOptions(session_id="s"))
    assert not (root / "s.jsonl").exists()


def test_a_bad_id_is_a_typed_value_error_naming_the_store(root: Path) -> None:
    store = JsonlSessionStore(root)
    with pytest.raises(SessionIdError, match=f"^{re.escape(str(root))}: field 'id'"):
        store.load("../escape")
    with pytest.raises(ValueError, match="cannot be stored as a file"):
        store.resume("../escape")


def test_logs_and_lock_files_are_created_0600_whatever_the_umask(root: Path) -> None:
    """A log holds a conversation: owner-only, not the umask's 0644."""
    previous = os.umask(0)
    try:
        session = JsonlSessionStore(root).create(CreateOptions("private"))
        for event in synthetic_turn(0, 1):
            session.add(event)
        session.close()
    finally:
        os.umask(previous)
    files = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files)
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {"0o600"}

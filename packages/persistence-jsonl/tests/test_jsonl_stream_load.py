"""The store's streaming load: the torn tail found from the file's end equals the rule on the
whole bytes, loads equal the whole-file reader's view, and damage is named as that reader
names it (it checks all UTF-8 before any JSON)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dsh_core import (
    CreateOptions,
    LogFormatError,
    SessionMeta,
    close_open_turn,
    read_log_bytes,
)
from dsh_core.testing import synthetic_turn
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_persistence_jsonl._store import (
    _lines_upto,  # pyright: ignore[reportPrivateUsage]
    _ShortRead,  # pyright: ignore[reportPrivateUsage]
    _torn_tail_start,  # pyright: ignore[reportPrivateUsage]
    _torn_tail_start_file,  # pyright: ignore[reportPrivateUsage]
)

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":1}\n'
EVENT = b'{"type":"x","seq":0,"time":1,"data":{}}\n'
LONG = b'{"type":"x","seq":1,"time":1,"data":{"t":"' + b"a" * 150_000 + b'"}}'

TAILS: dict[str, bytes] = {
    "empty": b"",
    "newline-only": b"\n",
    "header-without-newline": HEADER[:-1],
    "header-only": HEADER,
    "torn-header": HEADER[:20],
    "clean": HEADER + EVENT,
    "segment-without-newline": HEADER + EVENT + b'{"type":"x"',
    "unparsable-last-line": HEADER + EVENT + b'{"type":"x"\n',
    "blank-last-line": HEADER + EVENT + b"  \n",
    "two-newlines": HEADER + EVENT + b"\n",
    "bad-utf8-last-line": HEADER + EVENT + b'"\xff"\n',
    "nan-last-line": HEADER + EVENT + b"NaN\n",  # parses for the tail rule: not torn
    "long-last-line": HEADER + EVENT + LONG + b"\n",
    "long-torn-last-line": HEADER + EVENT + LONG[:-1] + b"\n",
    "long-segment-without-newline": HEADER + EVENT + LONG,
    "long-single-line": LONG + b"\n",
    "long-single-segment": LONG,
    "newline-at-block-edge": b"x" * (1 << 16) + b"\n" + EVENT,
    "newline-before-block-edge": b"x" * ((1 << 16) - 1) + b"\n" + b"y" * (1 << 16) + b"\n",
}


@pytest.mark.parametrize("name", sorted(TAILS))
def test_tail_found_from_the_end_equals_the_rule_on_the_whole_file(name: str) -> None:
    data = TAILS[name]
    assert _torn_tail_start_file(io.BytesIO(data), len(data)) == _torn_tail_start(data)


def _write_session(root: Path, turns: int) -> Path:
    store = JsonlSessionStore(root)
    session = store.create(
        CreateOptions(session_id="s", meta=SessionMeta(created_at=1_780_000_000_000))
    )
    seq = 0
    for turn in range(1, turns + 1):
        for event in synthetic_turn(seq, turn):
            session.add(event)
            seq += 1
        session.flush()
    session.close()
    return store.path_of("s")


@pytest.mark.parametrize("tail", [b"", b'{"type":"turn/start","seq":', b'{"type":\n'])
def test_load_equals_the_whole_file_reader(tmp_path: Path, tail: bytes) -> None:
    path = _write_session(tmp_path, 6)
    clean = path.read_bytes()
    with path.open("ab") as f:
        f.write(tail)
    expected = read_log_bytes(clean, str(path))
    expected.events.extend(close_open_turn(expected.events))
    loaded = JsonlSessionStore(tmp_path).load("s")
    assert loaded == expected
    assert [list(e.data) for e in loaded.events] == [list(e.data) for e in expected.events]
    assert path.read_bytes() == clean + tail  # load never writes


def test_resume_cuts_a_torn_tail_found_from_the_end(tmp_path: Path) -> None:
    path = _write_session(tmp_path, 3)
    clean = path.read_bytes()
    with path.open("ab") as f:
        f.write(b'{"type":"turn/start","seq":99,"da')
    session = JsonlSessionStore(tmp_path).resume("s")
    session.close()
    assert path.read_bytes() == clean  # the turns were whole: no closers to append


def test_damage_is_named_as_the_whole_file_reader_names_it(tmp_path: Path) -> None:
    path = _write_session(tmp_path, 2)
    lines = path.read_bytes().split(b"\n")
    # a JSON error on line 3 and invalid UTF-8 on line 5: the whole-file reader names line 5
    lines[2] = b"{oops"
    lines[4] = lines[4].replace(b'"turn"', b'"t\xffrn"', 1)
    damaged = b"\n".join(lines)
    path.write_bytes(damaged)
    with pytest.raises(LogFormatError) as whole:
        read_log_bytes(damaged, str(path))
    with pytest.raises(LogFormatError) as loaded:
        JsonlSessionStore(tmp_path).load("s")
    assert loaded.value.line == 5
    assert str(loaded.value) == str(whole.value)
    assert path.read_bytes() == damaged


def test_load_shares_repeated_keys_between_events(tmp_path: Path) -> None:
    _write_session(tmp_path, 2)
    events = JsonlSessionStore(tmp_path).load("s").events
    chunks = [e for e in events if e.type == "assistant/chunk"]
    assert chunks[0].type is chunks[1].type
    assert [id(k) for k in chunks[0].data] == [id(k) for k in chunks[1].data]


def test_a_file_shorter_than_its_size_is_a_short_read(tmp_path: Path) -> None:
    # _scan answers a short read with the whole-file reader (a writer rolled back a batch)
    path = _write_session(tmp_path, 2)
    data = path.read_bytes()
    with path.open("rb") as f, pytest.raises(_ShortRead):
        _torn_tail_start_file(f, len(data) + 10)
    with path.open("rb") as f, pytest.raises(_ShortRead):
        list(_lines_upto(f, len(data) + 10))
    with path.open("rb") as f:
        assert b"".join(_lines_upto(f, len(data))) == data

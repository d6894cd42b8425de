"""Events whose ``data`` stays JSON text until first used (issue 24: loading a 1M-event log
must cost < 3.5x the file): the stream reader keeps the common line's data undecoded, the
event behaves exactly like one built from a dict, and the crash repair reads only the tail."""

from __future__ import annotations

import copy
import io
import pickle
import threading
from typing import Any

import pytest

from dsh_core import (
    Event,
    LogFormatError,
    SessionHeader,
    SessionLog,
    close_open_turn,
    event_from_raw,
    read_log_bytes,
    render_log,
    step_start,
    tool_call,
    turn_end,
    turn_start,
)
from dsh_core._logformat import read_log_stream
from dsh_core.testing import synthetic_turn

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":1}\n'


def _undecoded(event: Event) -> bool:
    return getattr(event, "_raw") is not None  # noqa: B009 - the private state under test


def _stream(data: bytes) -> SessionLog:
    return read_log_stream(io.BytesIO(data), "t.jsonl")


def test_raw_event_decodes_once_and_keeps_the_dict() -> None:
    event = event_from_raw("x", 3, 7, b'{"a":[1,{"b":"\\u00e9\xc3\xa9"}]}')
    assert _undecoded(event)
    data = event.data
    assert data == {"a": [1, {"b": "éé"}]}
    assert not _undecoded(event)
    assert event.data is data
    data["c"] = 1  # mutations stay, as on a dataclass field
    assert event.data["c"] == 1


def test_raw_event_equals_and_prints_like_the_decoded_one() -> None:
    plain = Event("x", 3, 7, {"k": "v"})
    lazy = event_from_raw("x", 3, 7, '{"k":"v"}')
    assert lazy == plain
    assert plain == lazy
    assert repr(lazy) == repr(plain)
    assert repr(plain) == (
        "Event(type='x', seq=3, time=7, data={'k': 'v'}, surface_op=None, "
        "source_event_seqs=None, extra=None)"
    )
    assert lazy != event_from_raw("x", 3, 7, '{"k":"w"}')
    assert lazy != Event("x", 4, 7, {"k": "v"})
    assert lazy.__eq__("x") is NotImplemented
    with pytest.raises(TypeError):
        hash(lazy)


def test_raw_event_pickles_copies_and_renumbers() -> None:
    lazy = event_from_raw("x", 3, 7, b'{"k":[1]}')
    for other in (pickle.loads(pickle.dumps(lazy)), copy.copy(lazy), copy.deepcopy(lazy)):
        assert other == Event("x", 3, 7, {"k": [1]})
    moved = lazy.with_seq(9)
    assert moved == Event("x", 9, 7, {"k": [1]})
    assert moved.data is lazy.data  # a renumbered copy shares its data, as before
    full = Event("t", 1, 2, {"a": 1}, "append", [0], {"z": 1})
    assert pickle.loads(pickle.dumps(full)) == full


def test_assigning_data_replaces_the_undecoded_text() -> None:
    lazy = event_from_raw("x", 0, 0, b"this is never decoded")
    lazy.data = {"new": True}
    assert lazy.data == {"new": True}
    assert not _undecoded(lazy)


def _touch(event: Event, barrier: threading.Barrier, seen: list[Any]) -> None:
    barrier.wait()
    seen.append(event.data)


def test_threads_decoding_at_once_share_one_dict() -> None:
    for _ in range(20):
        lazy = event_from_raw("x", 0, 0, b'{"k":[' + b"[1]," * 2000 + b"0]}")
        seen: list[Any] = []
        barrier = threading.Barrier(4)
        threads = [threading.Thread(target=_touch, args=(lazy, barrier, seen)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(data is lazy.data for data in seen)


def test_stream_reader_keeps_the_common_line_undecoded() -> None:
    events = [*synthetic_turn(0, 1)]
    data = render_log(SessionHeader(id="s", created_at=1), events).encode("utf-8")
    log = _stream(data)
    assert log.events
    assert all(_undecoded(event) for event in log.events)
    assert log.events == read_log_bytes(data).events
    assert all(not _undecoded(event) for event in log.events)


@pytest.mark.parametrize(
    "line",
    [
        # not the common line: read and judged by the full path, with the same result
        b'{"type":"x","seq":0,"time":1,"data":{"a":1},"data":{"b":2}}',
        b'{"type":"x","seq":0,"time":1,"data":{"a":1},"seq":0}',
        b'{"type":"x","seq":0,"time":1,"data":{"a":1} }',
        b'{"type":"x", "seq":0,"time":1,"data":{"a":1}}',
        b'{"type":"x","seq":0,"time":1,"data":{"a":1}}  ',
        b'{"type":"x","seq":0,"time":1,"data":{"a":1},"surfaceOp":"append"}',
        b'{"type":"x","time":1,"seq":0,"data":{"a":1}}',
        b'{"type":"x","seq":0,"time":1,"data":{"a":"\\u00e9","b":[]}}',
        # the common line, with awkward contents
        '{"type":"t\u00e9\u2713","seq":0,"time":1,"data":{"a":"\u2014"}}'.encode(),
        b'{"type":"a\\/b\\u0041","seq":0,"time":1,"data":{"a":1}}',
        b'{"type":"x","seq":0,"time":-5,"data":{}}',
        b'{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":1,"step":1,'
        b'"chunk":{"type":"text-delta","index":0,"text":"hi"}}}',
    ],
)
def test_stream_reader_reads_every_line_shape_as_the_bytes_reader(line: bytes) -> None:
    for ending in (b"\n", b""):
        data = HEADER + line + ending
        assert _stream(data) == read_log_bytes(data)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (b'{"type":"x","seq":0,"time":1,"data":{"a":NaN}}', None),
        (b'{"type":"x","seq":1,"time":1,"data":{"a":1}}', "seq"),
        (b'{"type":"x","seq":0,"time":1.0,"data":{"a":1}}', "time"),
        (b'{"type":"x","seq":0,"time":1,"data":[1]}', "data"),
        (b'{"type":"session","seq":0,"time":1,"data":{}}', "type"),
        (b'{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":1,"step":1}}', "data.chunk"),
        (b'{"type":"x","seq":0,"time":1,"data":{"a":' + b"[" * 300 + b"]" * 300 + b"}}", None),
        (b'{"type":"x","seq":0,"time":1,"data":{"a":1}', None),
    ],
)
def test_stream_reader_refuses_what_the_bytes_reader_refuses(
    line: bytes, field: str | None
) -> None:
    data = HEADER + line + b"\n"
    with pytest.raises(LogFormatError) as whole:
        read_log_bytes(data, "t.jsonl")
    with pytest.raises(LogFormatError) as streamed:
        _stream(data)
    assert str(streamed.value) == str(whole.value)
    assert (streamed.value.line, streamed.value.field) == (2, field)


def _bad(seq: int) -> Event:
    """An event whose data cannot be decoded: touching it fails the test."""
    return event_from_raw("assistant/chunk", seq, 5, b"<never decoded>")


def test_crash_repair_reads_only_the_open_tail() -> None:
    events = [turn_start(0, 1, 4), _bad(1), _bad(2), turn_end(3, 4, 4, "completed")]
    events += [turn_start(4, 5, 5), step_start(5, 6, 5, 1)]
    events.append(tool_call(6, 7, 5, 1, "c1", "bash", "{}"))
    closers = close_open_turn(events)
    assert [(event.type, event.data.get("turn")) for event in closers] == [
        ("tool/result", 5),
        ("step/end", 5),
        ("turn/end", 5),
    ]
    assert close_open_turn(events[:4]) == []
    assert all(_undecoded(event) for event in events[1:3])


@pytest.mark.parametrize(
    ("turns", "expected"),
    [
        ([3, "x"], 4),  # an unnumbered turn after turn 3 is turn 4
        (["x", "y"], 2),
        ([7], 7),
        ([], 0),
    ],
)
def test_crash_repair_numbers_an_unnumbered_turn_from_the_earlier_ones(
    turns: list[Any], expected: int
) -> None:
    events: list[Event] = []
    for turn in turns:
        events.append(Event("turn/start", len(events), 1, {"turn": turn}))
        events.append(_bad(len(events)))
        events.append(Event("turn/end", len(events), 1, {"turn": turn}))
    events.append(Event("turn/start", len(events), 1, {"turn": None}))
    (closer,) = close_open_turn(events)
    assert closer.data["turn"] == expected + 1

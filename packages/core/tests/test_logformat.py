"""The DSH log reader and writer: envelopes, headers, packed rows, unknown shapes, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    Event,
    LogFormatError,
    SessionHeader,
    dumps_event,
    dumps_header,
    event_from_json,
    header_from_json,
    read_log,
    read_log_bytes,
    read_log_file,
    read_log_text,
    render_log,
    turn_end,
    user_message,
)
from dsh_core.testing import DAMAGED_LOGS, DamagedLog, synthetic_turn


def _line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


HEADER: dict[str, Any] = {"type": "session", "version": 0, "id": "s", "createdAt": 1000}


def _read_all_ways(text: str) -> list[list[str]]:
    """The events of ``text`` as read by each reader, as canonical lines."""
    logs = [
        read_log(text.split("\n"), "t"),
        read_log(text.splitlines(keepends=True), "t"),
        read_log_text(text, "t"),
        read_log_bytes(text.encode("utf-8"), "t"),
    ]
    return [[dumps_event(e) for e in log.events] for log in logs]


# --- header ----------------------------------------------------------------------------------


def test_header_optional_fields_are_omitted_never_null() -> None:
    header = SessionHeader(id="s", created_at=5)
    assert dumps_header(header) == '{"type":"session","version":0,"id":"s","createdAt":5}'
    full = SessionHeader(
        id="s",
        created_at=5,
        cwd="/w",
        parent_session="p",
        seed_length=0,
        origin="subagent",
        delegation_depth=0,
    )
    assert json.loads(dumps_header(full)) == {
        "type": "session",
        "version": 0,
        "id": "s",
        "createdAt": 5,
        "cwd": "/w",
        "parentSession": "p",
        "seedLength": 0,
        "origin": "subagent",
        "delegationDepth": 0,
    }
    assert "null" not in dumps_header(header) + dumps_header(full)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"seedLength": 0},
        {"seedLength": 2**53 - 1, "delegationDepth": 3},
        {"cwd": "/tmp/ü", "parentSession": "p", "origin": "subagent"},
        {"futureKey": {"nested": [1, None]}, "another": "x"},
    ],
    ids=["minimal", "seedLength-0", "large", "strings", "unknown-keys"],
)
def test_header_round_trips_exactly(fields: dict[str, Any]) -> None:
    line = _line({**HEADER, **fields})
    header = header_from_json(json.loads(line))
    assert dumps_header(header) == line
    if "seedLength" not in fields:
        assert header.seed_length is None
        assert header.effective_seed_length == 0
    else:
        assert header.seed_length == fields["seedLength"]


@pytest.mark.parametrize("version", [1, -1, "0", 0.0, False, None])
def test_header_version_other_than_int_0_is_refused_first(version: Any) -> None:
    # version is judged before anything else, even before the header's type
    with pytest.raises(LogFormatError) as caught:
        header_from_json({"type": "nope", "version": version}, "f.jsonl", 3)
    assert (caught.value.source, caught.value.line, caught.value.field) == ("f.jsonl", 3, "version")


# --- envelopes ---------------------------------------------------------------------------------


def test_envelopes_without_seq_and_time_are_numbered_and_timed_zero() -> None:
    rows: list[dict[str, Any]] = [
        {"type": "turn/start", "data": {"turn": 1}},
        {"type": "x/y", "seq": 1, "data": {}},
        {"type": "turn/end", "time": 9, "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]
    text = "\n".join(_line(r) for r in [HEADER, *rows]) + "\n"
    for lines in _read_all_ways(text):
        assert [json.loads(line)["seq"] for line in lines] == [0, 1, 2]
        assert [json.loads(line)["time"] for line in lines] == [0, 0, 9]


def test_unknown_types_and_envelope_keys_round_trip() -> None:
    rows: list[dict[str, Any]] = [
        {
            "type": "future/thing",
            "seq": 0,
            "time": 1,
            "data": {"deep": [{"a": None}]},
            "newEnvelopeKey": {"x": 1},
        },
        {
            "type": "user/message",
            "seq": 1,
            "time": 2,
            "data": {"content": []},
            "sourceEventSeqs": [0],
            "surfaceOp": {"op": "replace", "start": 0, "end": 1},
        },
        {"type": "assistant/message", "seq": 2, "time": 3, "data": {}, "surfaceOp": "append"},
    ]
    text = "\n".join(_line(r) for r in [HEADER, *rows]) + "\n"
    log = read_log_text(text)
    assert log.events[0].extra == {"newEnvelopeKey": {"x": 1}}
    assert log.events[1].source_event_seqs == [0]
    assert render_log(log.header, log.events) == text
    assert _read_all_ways(text)[0] == [_line(r) for r in rows]


def test_blank_lines_are_skipped_and_line_numbers_stay_physical() -> None:
    rows: list[str] = [
        _line(HEADER),
        "",
        _line({"type": "a", "data": {}}),
        "  ",
        _line({"type": "b", "seq": 5, "data": {}}),
    ]
    with pytest.raises(LogFormatError) as caught:
        read_log(rows, "f")
    assert (caught.value.line, caught.value.field) == (5, "seq")
    with pytest.raises(LogFormatError) as again:
        read_log_text("\n".join(rows) + "\n", "f")
    assert again.value.line == 5


def test_header_after_blank_lines_is_found() -> None:
    log = read_log_bytes(b"\n\n" + _line(HEADER).encode() + b"\n")
    assert log.header.id == "s"
    assert log.events == []


def test_crlf_logs_read_the_same() -> None:
    rows = [_line(HEADER), _line({"type": "a", "seq": 0, "time": 1, "data": {}})]
    assert read_log_text("\r\n".join(rows) + "\r\n").events == read_log_text("\n".join(rows)).events


def test_render_and_read_round_trip_synthetic_turns() -> None:
    events = [*synthetic_turn(0, 1)]
    events += synthetic_turn(len(events), 2)
    header = SessionHeader(id="s", created_at=1, seed_length=3)
    text = render_log(header, events)
    assert text.endswith("\n")
    assert text.count("\n") == len(events) + 1
    for lines in _read_all_ways(text):
        assert lines == [dumps_event(e) for e in events]
    assert read_log_text(text).header == header


def test_dumps_keep_non_ascii_and_compact() -> None:
    event = user_message(0, 1, 'é ✓ \u2028 "q"')
    line = dumps_event(event)
    assert "é ✓" in line
    assert ", " not in line
    assert "\n" not in line
    assert read_log_text(_line(HEADER) + "\n" + line + "\n").events == [event]


def test_event_canonical_key_order() -> None:
    event = turn_end(3, 4, 1, "completed")
    event.surface_op = "append"
    event.source_event_seqs = [1]
    event.extra = {"z": 1}
    assert list(json.loads(dumps_event(event))) == [
        "type",
        "seq",
        "time",
        "data",
        "sourceEventSeqs",  # upstream's order
        "surfaceOp",
        "z",
    ]


# --- packed rows -----------------------------------------------------------------------------


def _packed_log(*rows: dict[str, Any], before: int = 1) -> str:
    lines = [_line(HEADER)]
    lines += [_line({"type": "x", "seq": i, "time": 0, "data": {}}) for i in range(before)]
    lines += [_line(r) for r in rows]
    return "\n".join(lines) + "\n"


def test_text_chunks_expand_with_seq0_time0_and_dt() -> None:
    row = {
        "type": "text-chunks",
        "seq0": 1,
        "time0": 100,
        "data": {"turn": 2, "step": 3, "index": 4, "dt": [5, 0, 7], "texts": ["a", "b", "", "ü"]},
    }
    for lines in _read_all_ways(_packed_log(row)):
        members = [json.loads(line) for line in lines[1:]]
        assert [m["seq"] for m in members] == [1, 2, 3, 4]
        assert [m["time"] for m in members] == [100, 105, 105, 112]
        assert all(m["type"] == "assistant/chunk" for m in members)
        assert [m["data"]["chunk"] for m in members] == [
            {"type": "text-delta", "index": 4, "text": t} for t in ["a", "b", "", "ü"]
        ]
        assert all((m["data"]["turn"], m["data"]["step"]) == (2, 3) for m in members)


def test_reasoning_chunks_without_seq0_or_time0_follow_the_running_count() -> None:
    row = {
        "type": "reasoning-chunks",
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [2], "texts": ["x", "y"]},
    }
    after = {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}
    log = read_log_text(_packed_log(row, after, before=2))
    assert [e.seq for e in log.events] == [0, 1, 2, 3, 4]
    assert [e.time for e in log.events[2:4]] == [0, 2]
    assert log.events[2].data["chunk"] == {"type": "reasoning-delta", "index": 0, "text": "x"}
    assert log.events[4].type == "turn/end"


@pytest.mark.parametrize("with_name", [True, False])
def test_tool_call_chunks_carry_name_iff_the_row_has_it(with_name: bool) -> None:
    data: dict[str, Any] = {
        "turn": 1,
        "step": 1,
        "index": 1,
        "id": "call_1",
        "dt": [0, 3],
        "args": ["", "{", "}"],
    }
    if with_name:
        data["name"] = "bash"
    row = {"type": "tool-call-chunks", "seq0": 1, "time0": 10, "data": data}
    log = read_log_text(_packed_log(row))
    chunks = [e.data["chunk"] for e in log.events[1:]]
    assert [c["argumentsDelta"] for c in chunks] == ["", "{", "}"]
    assert all(c["type"] == "tool-call-delta" and c["id"] == "call_1" for c in chunks)
    assert all(("name" in c) is with_name for c in chunks)
    if with_name:
        assert list(chunks[0]) == ["type", "index", "id", "name", "argumentsDelta"]
    assert [e.time for e in log.events[1:]] == [10, 10, 13]


def test_single_member_row_needs_an_empty_dt() -> None:
    row = {
        "type": "text-chunks",
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["only"]},
    }
    log = read_log_text(_packed_log(row))
    assert log.events[1].data["chunk"]["text"] == "only"


def test_packed_rows_are_never_written_back() -> None:
    row = {
        "type": "text-chunks",
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]},
    }
    log = read_log_text(_packed_log(row))
    rendered = render_log(log.header, log.events)
    assert "text-chunks" not in rendered
    assert read_log_text(rendered).events == log.events


def test_event_from_json_expands_or_refuses() -> None:
    row = {
        "type": "text-chunks",
        "seq0": 7,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]},
    }
    assert [e.seq for e in event_from_json(row, 7)] == [7, 8]
    with pytest.raises(LogFormatError) as caught:
        event_from_json(row, 6, "src", 12)
    assert (caught.value.source, caught.value.line, caught.value.field) == ("src", 12, "seq0")
    assert "src:12: field 'seq0'" in str(caught.value)


# --- the damaged-log catalogue -------------------------------------------------------------


@pytest.mark.parametrize("case", DAMAGED_LOGS, ids=[c.id for c in DAMAGED_LOGS])
def test_damaged_logs_are_refused_by_every_reader(case: DamagedLog) -> None:
    readers = [lambda: read_log_bytes(case.data, "log.jsonl")]
    try:
        text = case.data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        readers += [
            lambda: read_log_text(text, "log.jsonl"),
            lambda: read_log(text.split("\n"), "log.jsonl"),
        ]
    for read in readers:
        with pytest.raises(LogFormatError) as caught:
            read()
        error = caught.value
        assert (error.source, error.line, error.field) == ("log.jsonl", case.line, case.field)
        assert str(error).startswith(f"log.jsonl:{case.line}:")
        assert error.reason in str(error)


def test_invalid_utf8_names_its_line_and_byte() -> None:
    data = _line(HEADER).encode() + b"\n" + b'{"type":"a","data":{"t":"\xff"}}\n'
    with pytest.raises(LogFormatError, match=r"f:2: invalid UTF-8 at byte \d+"):
        read_log_bytes(data, "f")


def test_log_format_error_reads_as_a_sentence() -> None:
    error = LogFormatError("a.jsonl", 3, "seedLength", "must be a non-negative integer")
    assert str(error) == "a.jsonl:3: field 'seedLength': must be a non-negative integer"
    assert str(LogFormatError("db", None, None, "bad")) == "db: bad"


def test_event_is_constructed_positionally() -> None:
    event = Event("t", 0, 1, {})
    assert event.to_json() == {"type": "t", "seq": 0, "time": 1, "data": {}}
    assert event.with_seq(4).seq == 4
    assert event.seq == 0


def test_read_log_file_reads_a_file_and_names_it_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    text = render_log(SessionHeader(id="s", created_at=5), synthetic_turn(0, 1))
    path.write_text(text, encoding="utf-8")
    assert read_log_file(path) == read_log_text(text, str(path))
    path.write_bytes(text.encode() + b"\xff\n")
    lines = text.count("\n")
    with pytest.raises(LogFormatError, match=f"^{path}:{lines + 1}: invalid UTF-8"):
        read_log_file(str(path))
    with pytest.raises(FileNotFoundError):
        read_log_file(tmp_path / "missing.jsonl")

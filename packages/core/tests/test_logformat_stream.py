"""``read_log_stream`` (line by line from bytes, repeated strings shared) against
``read_log_bytes``: the same header and events on every corpus log, every tolerated variant
and every damaged log of the catalogue, with keys and short values shared between events."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dsh_core import LogFormatError, SessionHeader, SessionLog, read_log_bytes, render_log
from dsh_core._logformat import read_log_stream
from dsh_core.testing import (
    DAMAGED_LOGS,
    DamagedLog,
    corpus_unavailable,
    synthetic_turn,
    upstream_corpus,
)

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":1}\n'


def _stream(data: bytes, source: str = "t.jsonl") -> SessionLog:
    return read_log_stream(io.BytesIO(data), source)


def _synthetic() -> bytes:
    events = [*synthetic_turn(0, 1), *synthetic_turn(0, 2)]
    events = [event.with_seq(seq) for seq, event in enumerate(events)]
    return render_log(SessionHeader(id="s", created_at=1), events).encode("utf-8")


@pytest.mark.corpus
def test_stream_reader_equals_the_bytes_reader_on_the_corpus() -> None:
    root = upstream_corpus(__file__) or Path("upstream-corpus (not found)")
    if not root.is_dir():
        corpus_unavailable(f"upstream corpus {root} is absent (set DSH_UPSTREAM_CORPUS)")
    paths = sorted(root.rglob("session*.jsonl"))
    assert len(paths) > 50
    for path in paths:
        data = path.read_bytes()
        with path.open("rb") as f:
            streamed = read_log_stream(f, str(path))
        assert streamed == read_log_bytes(data, str(path)), path


def test_stream_reader_equals_the_bytes_reader_on_synthetic_turns() -> None:
    data = _synthetic()
    assert _stream(data) == read_log_bytes(data, "t.jsonl")


VARIANTS: dict[str, bytes] = {
    "crlf": _synthetic().replace(b"\n", b"\r\n"),
    "leading-blank": b"\n \n" + _synthetic(),
    "blank-lines": _synthetic().replace(b"\n", b"\n\n", 5),
    "no-final-newline": _synthetic().rstrip(b"\n"),
    "leading-space": _synthetic().replace(b'{"type"', b' {"type"', 4),
    "trailing-space": _synthetic().replace(b"}\n", b"} \t\n", 4),
    "duplicate-keys": HEADER + b'{"type":"x","seq":0,"data":{"a":1,"b":2,"a":3}}\n',
    "packed-row": HEADER + b'{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,'
    b'"texts":["a","b"],"dt":[2]}}\n',
    "unknown-envelope-key": HEADER + b'{"type":"x","seq":0,"data":{},"zz":[1]}\n',
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_stream_reader_tolerates_what_the_bytes_reader_tolerates(variant: str) -> None:
    data = VARIANTS[variant]
    expected = read_log_bytes(data, "t.jsonl")
    got = _stream(data)
    assert got == expected
    # key order too: dict equality ignores it, the writer does not
    assert [list(e.data) for e in got.events] == [list(e.data) for e in expected.events]
    assert [e.extra for e in got.events] == [e.extra for e in expected.events]


@pytest.mark.parametrize("damaged", DAMAGED_LOGS, ids=[d.id for d in DAMAGED_LOGS])
def test_stream_reader_refuses_every_damaged_log_like_the_bytes_reader(
    damaged: DamagedLog,
) -> None:
    with pytest.raises(LogFormatError) as whole:
        read_log_bytes(damaged.data, "d.jsonl")
    with pytest.raises(LogFormatError) as streamed:
        _stream(damaged.data, "d.jsonl")
    assert (streamed.value.line, streamed.value.field) == (damaged.line, damaged.field)
    assert str(streamed.value) == str(whole.value)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"NaN\n", "invalid JSON (NaN is not valid JSON)"),
        (b'{"type":"x","seq":0,"data":{"v":Infinity}}\n', "Infinity is not valid JSON"),
        (b"\xef\xbb\xbf{}\n", "Unexpected UTF-8 BOM"),
        (b'{"type":"x","seq":0,"data":{}}x\n', "Extra data"),
        (b'{"type":"x","seq":0,"data":{}\n', "invalid JSON"),
    ],
)
def test_stream_reader_names_bad_json_like_the_bytes_reader(line: bytes, reason: str) -> None:
    data = HEADER + b"\n" + line
    with pytest.raises(LogFormatError) as whole:
        read_log_bytes(data, "t.jsonl")
    with pytest.raises(LogFormatError) as streamed:
        _stream(data)
    assert streamed.value.line == 3
    assert reason in str(streamed.value)
    assert str(streamed.value) == str(whole.value)


def test_stream_reader_names_invalid_utf8_by_line_and_file_offset() -> None:
    bad = b'{"type":"x","seq":0,"data":{"t":"\xff"}}\n'
    data = HEADER + b"\n" + bad
    with pytest.raises(LogFormatError) as whole:
        read_log_bytes(data, "t.jsonl")
    with pytest.raises(LogFormatError) as streamed:
        _stream(data)
    assert (streamed.value.line, streamed.value.field) == (3, None)
    offset = len(HEADER) + 1 + bad.index(b"\xff")
    assert f"at byte {offset}" in str(streamed.value)
    assert str(streamed.value) == str(whole.value)


def test_stream_reader_names_the_first_problem_in_line_order() -> None:
    # the documented difference: the bytes reader checks all UTF-8 before any JSON
    data = HEADER + b"{oops\n" + b'{"type":"x","seq":1,"data":{"t":"\xff"}}\n'
    with pytest.raises(LogFormatError) as whole:
        read_log_bytes(data, "t.jsonl")
    with pytest.raises(LogFormatError) as streamed:
        _stream(data)
    assert (whole.value.line, streamed.value.line) == (3, 2)


@pytest.mark.parametrize("data", [b"", b"\n\n", b"  \n"])
def test_stream_reader_refuses_a_log_without_header(data: bytes) -> None:
    with pytest.raises(LogFormatError) as whole:
        read_log_bytes(data, "t.jsonl")
    with pytest.raises(LogFormatError) as streamed:
        _stream(data)
    assert str(streamed.value) == str(whole.value)


def test_stream_reader_shares_keys_and_short_values_between_events() -> None:
    log = _stream(_synthetic())
    chunks = [e for e in log.events if e.type == "assistant/chunk"]
    assert len(chunks) > 2
    first, second = chunks[0], chunks[1]
    assert first.type is second.type
    for a, b in zip(first.data, second.data, strict=True):
        assert a == b
        assert a is b
    a_chunk, b_chunk = first.data["chunk"], second.data["chunk"]
    assert next(iter(a_chunk)) is next(iter(b_chunk))  # "type"
    deltas = [e.data["chunk"] for e in chunks if e.data["chunk"]["type"] == "text-delta"]
    assert deltas[0]["type"] is deltas[1]["type"]
    # the plain reader does not share: the test above can fail
    plain = [e for e in read_log_bytes(_synthetic()).events if e.type == "assistant/chunk"]
    assert plain[0].type is not plain[1].type

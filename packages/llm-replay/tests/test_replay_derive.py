"""Deriving replay scripts from session logs: grouping, finish, packed rows, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    Chunk,
    Event,
    LogFormatError,
    SessionHeader,
    assistant_chunk,
    render_log,
    step_end,
    step_start,
    turn_end,
    turn_start,
)
from dsh_llm_replay import (
    ChunksEntry,
    ReplayHeader,
    UnterminatedGroupError,
    derive_replay_script,
    parse_session_header,
    parse_session_log,
)

JUNE = [
    "text-turn",
    "multi-turn",
    "tool-call-turn",
    "subagent-spawn",
    "subagent-fork",
    "subagent-multi",
    "handshake",
]


def text_call(text: str) -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def events_for(*calls: tuple[int, int, list[Chunk]]) -> list[Event]:
    """A log body with one step per call (retries share a (turn, step))."""
    events: list[Event] = []
    for turn, step, chunks in calls:
        events.append(step_start(len(events), 0, turn, step))
        events.extend(assistant_chunk(len(events), 0, turn, step, c) for c in chunks)
        events.append(step_end(len(events), 0, turn, step))
    return events


def texts(entry: object) -> str:
    assert isinstance(entry, ChunksEntry)
    return "".join(str(c.get("text", "")) for c in entry.chunks if c["type"] == "text-delta")


def count_finishes(path: Path) -> int:
    return sum(
        1
        for e in parse_session_log(path.read_text(), str(path))
        if e.type == "assistant/chunk" and e.data["chunk"]["type"] == "finish"
    )


@pytest.mark.corpus
@pytest.mark.parametrize("scenario", JUNE)
def test_replay_june_entry_counts_equal_finish_chunks(corpus: Path, scenario: str) -> None:
    for path in sorted((corpus / "june" / scenario).glob("session*.jsonl")):
        events = parse_session_log(path.read_text(), str(path))
        entries = derive_replay_script(events, str(path))
        assert len(entries) == count_finishes(path), path
        assert all(isinstance(e, ChunksEntry) and e.chunks[-1]["type"] == "finish" for e in entries)


@pytest.mark.corpus
def test_replay_june_text_turn_streams_the_recorded_chunks(corpus: Path) -> None:
    path = corpus / "june" / "text-turn" / "session.jsonl"
    events = parse_session_log(path.read_text())
    [entry] = derive_replay_script(events)
    recorded = [e.data["chunk"] for e in events if e.type == "assistant/chunk"]
    assert isinstance(entry, ChunksEntry)
    assert list(entry.chunks) == recorded
    # The parsed dicts are handed over as they are (no per-chunk copies).
    chunk_events = [e for e in events if e.type == "assistant/chunk"]
    assert all(a is b.data["chunk"] for a, b in zip(entry.chunks, chunk_events, strict=True))


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("scenario", "counts"),
    [
        ("packed-chunks", {"session.jsonl": 2}),
        ("subagent-fork-in-process", {"session.jsonl": 3, "session.1.jsonl": 2}),
    ],
)
def test_replay_head_packed_rows_derive_expanded(
    corpus: Path, scenario: str, counts: dict[str, int]
) -> None:
    for name, expected in counts.items():
        path = corpus / "head" / scenario / name
        raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        packed = [row for row in raw if row["type"].endswith("-chunks")]
        assert packed, "the fixture must hold packed rows for this test to mean anything"
        events = parse_session_log(path.read_text(), str(path))
        entries = derive_replay_script(events, str(path))
        assert len(entries) == expected == count_finishes(path)
        members = sum(len(row["data"].get("texts", row["data"].get("args", []))) for row in packed)
        chunk_events = sum(1 for e in events if e.type == "assistant/chunk")
        assert sum(len(e.chunks) for e in entries if isinstance(e, ChunksEntry)) == chunk_events
        assert chunk_events == members + sum(1 for r in raw if r["type"] == "assistant/chunk")


@pytest.mark.corpus
def test_replay_head_packed_tool_call_args_rebuild_the_call(corpus: Path) -> None:
    path = corpus / "head" / "packed-chunks" / "session.jsonl"
    first = derive_replay_script(parse_session_log(path.read_text()))[0]
    assert isinstance(first, ChunksEntry)
    deltas = [c for c in first.chunks if c["type"] == "tool-call-delta"]
    args = "".join(str(c.get("argumentsDelta")) for c in deltas)
    block = next(
        c for c in first.chunks if c["type"] == "block-end" and c["block"]["type"] == "tool-call"
    )
    assert args == block["block"].get("arguments")
    assert first.chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


def test_replay_one_entry_per_finish_including_retries_in_a_step() -> None:
    events = events_for(
        (1, 1, text_call("a")),
        (1, 2, text_call("b")),
        (2, 1, text_call("c") + text_call("c-retry")),
    )
    entries = derive_replay_script(events)
    assert [texts(e) for e in entries] == ["a", "b", "c", "c-retry"]


def test_replay_non_chunk_events_are_ignored() -> None:
    events = [
        turn_start(0, 0, 1),
        Event("future/kind", 1, 0, {"x": 1}),
        *[e.with_seq(2 + i) for i, e in enumerate(events_for((1, 1, text_call("x"))))],
    ]
    events.append(turn_end(len(events), 0, 1, "completed"))
    assert [texts(e) for e in derive_replay_script(events)] == ["x"]
    assert derive_replay_script([turn_start(0, 0, 1)]) == []


def test_replay_group_cut_by_a_step_change_names_turn_and_step() -> None:
    events = events_for((3, 2, text_call("cut")[:2]), (3, 3, text_call("next")))
    with pytest.raises(UnterminatedGroupError) as info:
        derive_replay_script(events, "scenario/session.jsonl")
    error = info.value
    assert (error.source, error.turn, error.step, error.chunks) == (
        "scenario/session.jsonl",
        3,
        2,
        2,
    )
    message = str(error)
    assert "scenario/session.jsonl" in message
    assert "turn 3, step 2" in message
    assert "turn 3, step 3 began" in message
    assert "replay.override.json" in message


def test_replay_group_cut_by_the_end_of_the_log_is_an_error() -> None:
    events = events_for((1, 1, text_call("ok")), (2, 1, text_call("partial")[:2]))
    with pytest.raises(UnterminatedGroupError, match=r"turn 2, step 1 .* end of the log"):
        derive_replay_script(events, "s.jsonl")


def test_replay_parse_header_reads_id_created_at_and_seed_length() -> None:
    fork = SessionHeader(id="child", created_at=42, parent_session="parent", seed_length=7)
    text = "\n" + render_log(fork, events_for((1, 1, text_call("x"))))
    assert parse_session_header(text) == ReplayHeader("child", 42, 7, "parent")
    plain = render_log(SessionHeader(id="p", created_at=1), [])
    assert parse_session_header(plain) == ReplayHeader("p", 1, 0, None)


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("", 1, None),
        (
            '{"type":"session","version":0,"id":"x","createdAt":1,"seedLength":-1}\n',
            1,
            "seedLength",
        ),
        ('\n\n{"type":"session","version":1,"id":"x","createdAt":1}\n', 3, "version"),
        ('{"type":"session","version":0,"id":"x","createdAt":1', 1, None),
    ],
)
def test_replay_parse_header_errors_name_the_line(text: str, line: int, field: str | None) -> None:
    with pytest.raises(LogFormatError) as info:
        parse_session_header(text, "h.jsonl")
    assert (info.value.source, info.value.line, info.value.field) == ("h.jsonl", line, field)


def _log(*rows: Any) -> str:
    head = {"type": "session", "version": 0, "id": "s", "createdAt": 1}
    return "\n".join(json.dumps(r) if not isinstance(r, str) else r for r in (head, *rows)) + "\n"


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (_log({"type": "turn/start", "data": {"turn": 1}}, "{not json"), 3, "invalid JSON"),
        (_log("[1, 2]"), 2, "JSON object"),
        (
            _log(
                {
                    "type": "text-chunks",
                    "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a"]},
                }
            ),
            2,
            "dt has 1 entries",
        ),
        (
            _log(
                {
                    "type": "assistant/chunk",
                    "seq": 5,
                    "data": {"turn": 1, "step": 1, "chunk": {"type": "finish"}},
                }
            ),
            2,
            "seq gap",
        ),
    ],
)
def test_replay_parse_log_errors_name_the_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(LogFormatError, match=fragment) as info:
        parse_session_log(text, "bad.jsonl")
    assert (info.value.source, info.value.line) == ("bad.jsonl", line)
    assert str(info.value).startswith(f"bad.jsonl:{line}:")


def test_replay_parse_log_fills_seq_and_time_and_expands_packed_rows() -> None:
    text = _log(
        {"type": "step/start", "data": {"turn": 1, "step": 1}},
        {
            "type": "text-chunks",
            "time0": 100,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [5], "texts": ["he", "llo"]},
        },
        {
            "type": "assistant/chunk",
            "data": {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "stop"}}},
        },
    )
    events = parse_session_log(text)
    assert [(e.seq, e.time) for e in events] == [(0, 0), (1, 100), (2, 105), (3, 0)]
    [entry] = derive_replay_script(events)
    assert texts(entry) == "hello"
    # Same result through the CRLF / blank-line tolerant path.
    assert parse_session_log(text.replace("\n", "\r\n\n")) == events


def test_replay_speaks_the_core_entry_vocabulary() -> None:
    # One vocabulary for every scripted model: replay re-exports dsh_core's entries.
    import dsh_core  # noqa: PLC0415
    import dsh_llm_replay  # noqa: PLC0415

    for name in ("ChunksEntry", "ThrowEntry", "HangEntry"):
        assert getattr(dsh_llm_replay, name) is getattr(dsh_core, name)
    assert issubclass(dsh_llm_replay.UnterminatedGroupError, dsh_core.UnterminatedCallError)
    assert issubclass(dsh_llm_replay.UnterminatedGroupError, dsh_llm_replay.ReplayError)

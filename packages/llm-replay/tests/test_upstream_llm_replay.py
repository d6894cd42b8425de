"""Upstream's ``llm-replay/tests/llm-replay.spec.ts`` (June 2026) as conformance cases.

Upstream drives its replay through the cordis ``llm/stream`` waterfall; ours is a
:class:`ReplayModelClient`, so each case streams from the client directly. Ledger:
COMPATIBILITY.md § "Upstream unit tests".
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dsh_core import Chunk, Event, LogFormatError, ModelError, ModelRequest
from dsh_llm_replay import (
    ChunksEntry,
    HangEntry,
    OverrideError,
    ReplayError,
    ReplayModelClient,
    ReplaySettings,
    ScriptExhaustedError,
    ThrowEntry,
    UnrecordedSessionError,
    UnterminatedGroupError,
    derive_replay_script,
    load_session_scripts,
    parse_session_header,
    parse_session_log,
)

pytestmark = pytest.mark.anyio

TEXT: list[Any] = [  # upstream's usage shape (no cache fields)
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "hi"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hi"}},
    {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1}},
    {"type": "finish", "reason": {"kind": "stop"}},
]
SECOND: list[Chunk] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "two"},
    {"type": "finish", "reason": {"kind": "stop"}},
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _chunk_event(seq: int, turn: int, step: int, chunk: Chunk) -> dict[str, Any]:
    # Upstream numbers its test events from 1; our reader checks that ``seq`` runs from 0
    # (DESIGN §3) and fills it when absent, so the port leaves it out.
    del seq
    return {"type": "assistant/chunk", "data": {"turn": turn, "step": step, "chunk": chunk}}


def _jsonl(events: list[dict[str, Any]], **header: Any) -> str:
    head = {"type": "session", "version": 0, "id": "s1", "createdAt": 0} | header
    return "\n".join(json.dumps(line) for line in [head, *events]) + "\n"


def _calls(*calls: list[Any]) -> list[dict[str, Any]]:
    """One ``stream()`` call per step of turn 1."""
    events: list[dict[str, Any]] = []
    for step, chunks in enumerate(calls, 1):
        events += [_chunk_event(len(events), 1, step, c) for c in chunks]
    return events


def _events(raw: list[dict[str, Any]]) -> list[Event]:
    return parse_session_log(_jsonl(raw))


def _write(path: Path, events: list[dict[str, Any]], **header: Any) -> Path:
    path.write_text(_jsonl(events, **header))
    return path


async def _drain(client: ReplayModelClient, session: str = "live") -> list[Chunk]:
    return [c async for c in client.stream(ModelRequest(session_id=session, messages=[]))]


# describe('parseSessionLog')
def test_parse_skips_the_header_and_parses_each_event() -> None:
    [event] = parse_session_log(_jsonl([_chunk_event(1, 1, 1, TEXT[0])]))
    assert (event.type, event.seq, event.data["chunk"]) == ("assistant/chunk", 0, TEXT[0])


def test_parse_ignores_blank_lines() -> None:
    header = json.dumps({"type": "session", "version": 0, "id": "s1", "createdAt": 0})
    event = json.dumps(_chunk_event(0, 1, 1, TEXT[0]))
    assert len(parse_session_log(f"{header}\n\n{event}\n\n")) == 1


# describe('deriveReplayScript')
@pytest.mark.parametrize(
    ("case", "events", "expected"),
    [
        ("groups one stream() call into one entry", _calls(TEXT), [TEXT]),
        ("one entry per distinct (turn, step), in log order", _calls(TEXT, SECOND), [TEXT, SECOND]),
        (
            "separates calls across turns too",
            [_chunk_event(i, 1, 1, c) for i, c in enumerate(TEXT)]
            + [_chunk_event(9 + i, 2, 1, c) for i, c in enumerate(TEXT)],
            [TEXT, TEXT],
        ),
        (
            "ignores non-assistant/chunk events",
            [{"type": "turn/start", "data": {"turn": 1}}]
            + [_chunk_event(1 + i, 1, 1, c) for i, c in enumerate(TEXT)]
            + [
                {
                    "type": "turn/end",
                    "data": {"turn": 1, "reason": {"kind": "completed"}},
                }
            ],
            [TEXT],
        ),
        ("an empty script for a log with no assistant/chunk events", [], []),
        (
            "keeps a finish-error chunk in the derived entry",
            _calls(
                [
                    {"type": "block-start", "index": 0, "blockType": "text"},
                    {"type": "finish", "reason": {"kind": "error", "message": "boom", "code": "X"}},
                ]
            ),
            [
                [
                    {"type": "block-start", "index": 0, "blockType": "text"},
                    {"type": "finish", "reason": {"kind": "error", "message": "boom", "code": "X"}},
                ]
            ],
        ),
    ],
)
def test_derive(case: str, events: list[dict[str, Any]], expected: list[list[Chunk]]) -> None:
    script = derive_replay_script(_events(events))
    assert script == [ChunksEntry(tuple(chunks)) for chunks in expected], case


def test_a_group_without_finish_needs_an_override_and_names_turn_and_step() -> None:
    events = [
        _chunk_event(0, 2, 3, {"type": "block-start", "index": 0, "blockType": "text"}),
        _chunk_event(1, 2, 3, {"type": "text-delta", "index": 0, "text": "par"}),
        {"type": "turn/end", "data": {"turn": 2, "reason": {"kind": "error"}}},
    ]
    with pytest.raises(
        UnterminatedGroupError, match=r"no finish chunk.*replay\.override\.json"
    ) as info:
        derive_replay_script(_events(events))
    assert (info.value.turn, info.value.step) == (2, 3)


# describe('loadReplayScript')
def test_load_derives_from_the_log_without_an_override(tmp_path: Path) -> None:
    [script] = load_session_scripts(_write(tmp_path / "s.jsonl", _calls(TEXT)))
    assert script.entries == (ChunksEntry(tuple(TEXT)),)


def test_load_uses_a_bare_override_instead_of_the_log(tmp_path: Path) -> None:
    override = tmp_path / "replay.override.json"
    override.write_text(
        json.dumps(
            [{"kind": "throw", "chunks": [], "message": "401", "code": "AUTH", "status": 401}]
        )
    )
    [script] = load_session_scripts(_write(tmp_path / "s.jsonl", _calls(TEXT)), (), override)
    assert script.entries == (ThrowEntry((), "401", "AUTH", 401),)


def test_load_falls_back_to_the_log_when_the_override_file_is_absent(tmp_path: Path) -> None:
    log = _write(tmp_path / "s.jsonl", _calls(TEXT))
    [script] = load_session_scripts(log, (), tmp_path / "nope.json")
    assert script.entries == (ChunksEntry(tuple(TEXT)),)


def test_load_fails_loud_when_the_fixture_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match="the recorded session log does not exist"):
        load_session_scripts(tmp_path / "absent.jsonl")


def test_an_override_that_is_not_an_entry_list_or_patch_document_is_refused(tmp_path: Path) -> None:
    override = tmp_path / "replay.override.json"
    override.write_text('{"not":"array"}')
    with pytest.raises(OverrideError):
        load_session_scripts(_write(tmp_path / "s.jsonl", []), (), override)


def test_a_malformed_entry_kind_is_refused_when_loaded(tmp_path: Path) -> None:
    # Upstream fails at the call ('the assertNever guard'); we refuse the file up front.
    override = tmp_path / "replay.override.json"
    override.write_text('[{"kind": "bogus"}]')
    with pytest.raises(OverrideError, match="bogus"):
        load_session_scripts(_write(tmp_path / "s.jsonl", []), (), override)


# describe('installLlmReplay (through the real waterfall)')
async def test_serves_the_nth_call_the_nth_entry(tmp_path: Path) -> None:
    client = ReplayModelClient(
        load_session_scripts(_write(tmp_path / "s.jsonl", _calls(TEXT, SECOND)))
    )
    assert await _drain(client) == TEXT
    assert await _drain(client) == SECOND


async def test_a_throw_entry_raises_a_model_error_after_its_prefix(tmp_path: Path) -> None:
    override = tmp_path / "replay.override.json"
    partial: list[Chunk] = [{"type": "block-start", "index": 0, "blockType": "text"}]
    entry = {
        "kind": "throw",
        "chunks": partial,
        "message": "unauthorized",
        "code": "AUTH",
        "status": 401,
    }
    override.write_text(json.dumps([entry]))
    client = ReplayModelClient(load_session_scripts(_write(tmp_path / "s.jsonl", []), (), override))
    seen: list[Chunk] = []

    async def consume() -> None:
        async for chunk in client.stream(ModelRequest(session_id="live", messages=[])):
            seen.append(chunk)

    with pytest.raises(ModelError) as info:
        await consume()
    assert (str(info.value), info.value.code, info.value.status) == ("unauthorized", "AUTH", 401)
    assert seen == partial


async def test_a_hang_entry_streams_a_partial_text_then_waits_for_cancellation(
    tmp_path: Path,
) -> None:
    override = tmp_path / "replay.override.json"
    override.write_text('[{"kind": "hang"}]')
    client = ReplayModelClient(load_session_scripts(_write(tmp_path / "s.jsonl", []), (), override))
    stream = client.stream(ModelRequest(session_id="live", messages=[]))
    assert (await anext(stream))["type"] == "block-start"
    assert (await anext(stream))["type"] == "text-delta"
    waiting = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_an_exhausted_script_fails_loud(tmp_path: Path) -> None:
    client = ReplayModelClient(load_session_scripts(_write(tmp_path / "s.jsonl", _calls(TEXT))))
    await _drain(client)
    with pytest.raises(ScriptExhaustedError, match="made call 2 but its script has 1 entries"):
        await _drain(client)


# describe('parseSessionHeader')
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_jsonl([], id="abc", createdAt=42), ("abc", 42, 0)),
        (
            '{"type":"session","version":0,"id":"child","createdAt":7,"seedLength":4}\n',
            ("child", 7, 4),
        ),
    ],
)
def test_parse_session_header(text: str, expected: tuple[str, int, int]) -> None:
    header = parse_session_header(text)
    assert (header.id, header.created_at, header.seed_length) == expected


@pytest.mark.parametrize("text", ['{"type":"session","version":0}\n', ""])
def test_a_header_without_id_or_created_at_is_refused(text: str) -> None:
    # Deliberate difference: upstream defaults to id "" / createdAt 0; we refuse a header
    # that lacks its required fields (DESIGN §3), naming the line.
    with pytest.raises(LogFormatError):
        parse_session_header(text)


# describe('loadSessionScripts')
def test_one_primary_script_for_a_single_session(tmp_path: Path) -> None:
    [script] = load_session_scripts(
        _write(tmp_path / "session.jsonl", _calls(TEXT), id="p", createdAt=100)
    )
    assert (script.header.id, script.header.created_at) == ("p", 100)
    assert script.entries == (ChunksEntry(tuple(TEXT)),)


def test_children_follow_the_primary_by_created_at(tmp_path: Path) -> None:
    primary = _write(tmp_path / "session.jsonl", _calls(TEXT), id="parent", createdAt=100)
    later = _write(tmp_path / "session.1.jsonl", _calls(TEXT), id="late", createdAt=200)
    tie = _write(tmp_path / "session.2.jsonl", _calls(TEXT), id="tie", createdAt=100)
    scripts = load_session_scripts(primary, [later, tie])
    assert [s.header.id for s in scripts] == ["parent", "tie", "late"]


@pytest.mark.parametrize("given", [(2, 10, 1), (10, 2, 1), (1, 2, 10)])
def test_children_whose_headers_tie_bind_by_file_number_whatever_the_order_given(
    tmp_path: Path, given: tuple[int, ...]
) -> None:
    # Normalized fixtures: every header is createdAt 0 with one placeholder id.
    primary = _write(tmp_path / "session.jsonl", _calls(TEXT), id="{{sessionId}}", createdAt=0)
    kids = {
        n: _write(tmp_path / f"session.{n}.jsonl", _calls(TEXT), id="{{sessionId}}", createdAt=0)
        for n in given
    }
    scripts = load_session_scripts(primary, [kids[n] for n in given])
    assert [Path(s.source).name for s in scripts[1:]] == [
        "session.1.jsonl",
        "session.2.jsonl",
        "session.10.jsonl",
    ]


def test_same_created_at_children_order_deterministically(tmp_path: Path) -> None:
    primary = _write(tmp_path / "session.jsonl", _calls(TEXT), id="parent", createdAt=100)
    c2 = _write(tmp_path / "session.2.jsonl", _calls(TEXT), id="c2", createdAt=100)
    c1 = _write(tmp_path / "session.1.jsonl", _calls(TEXT), id="c1", createdAt=100)
    assert [s.header.id for s in load_session_scripts(primary, [c2, c1])] == ["parent", "c1", "c2"]


def test_a_missing_child_fixture_fails(tmp_path: Path) -> None:
    primary = _write(tmp_path / "session.jsonl", _calls(TEXT))
    with pytest.raises(
        ReplayError, match=r"absent\.jsonl: the recorded session log does not exist"
    ):
        load_session_scripts(primary, [tmp_path / "absent.jsonl"])


def test_a_fork_child_script_is_derived_from_its_own_events_only(tmp_path: Path) -> None:
    primary = _write(tmp_path / "session.jsonl", _calls(TEXT), id="parent", createdAt=100)
    parent_chunk: Chunk = {"type": "text-delta", "index": 0, "text": "PARENT-RESPONSE"}
    own: list[Chunk] = [
        {"type": "text-delta", "index": 0, "text": "CHILD-RESPONSE"},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    events = [
        _chunk_event(0, 1, 1, parent_chunk),
        _chunk_event(1, 1, 1, {"type": "finish", "reason": {"kind": "stop"}}),
        _chunk_event(2, 2, 1, own[0]),
        _chunk_event(3, 2, 1, own[1]),
    ]
    child = _write(tmp_path / "session.1.jsonl", events, id="child", createdAt=200, seedLength=2)
    scripts = load_session_scripts(primary, [child])
    assert scripts[1].entries == (ChunksEntry(tuple(own)),)


def test_the_override_drives_the_primary_and_children_are_still_derived(tmp_path: Path) -> None:
    override = tmp_path / "replay.override.json"
    override.write_text('[{"kind": "hang"}]')
    primary = _write(tmp_path / "session.jsonl", [], id="p", createdAt=1)
    child = _write(tmp_path / "session.1.jsonl", _calls(TEXT), id="c", createdAt=2)
    scripts = load_session_scripts(primary, [child], override)
    assert scripts[0].entries == (HangEntry(),)
    assert scripts[1].entries == (ChunksEntry(tuple(TEXT)),)


def test_an_override_alone_gives_the_primary_a_default_header(tmp_path: Path) -> None:
    override = tmp_path / "replay.override.json"
    override.write_text('[{"kind": "hang"}]')
    [script] = load_session_scripts(tmp_path / "absent.jsonl", (), override)
    assert (script.header.id, script.header.created_at, script.entries) == ("", 0, (HangEntry(),))


# describe('installLlmReplay (per-session keying)')
async def test_each_live_session_gets_its_own_script_by_first_call_order(tmp_path: Path) -> None:
    primary = _write(tmp_path / "session.jsonl", _calls(TEXT), id="rec-parent", createdAt=100)
    child = _write(tmp_path / "session.1.jsonl", _calls(SECOND), id="rec-child", createdAt=200)
    client = ReplayModelClient(load_session_scripts(primary, [child]))
    assert await _drain(client, "live-A") == TEXT
    assert await _drain(client, "live-B") == SECOND
    with pytest.raises(ScriptExhaustedError):
        await _drain(client, "live-A")


async def test_each_session_keeps_its_own_cursor(tmp_path: Path) -> None:
    a2: list[Chunk] = [
        {"type": "text-delta", "index": 0, "text": "a2"},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    b2: list[Chunk] = [
        {"type": "text-delta", "index": 0, "text": "b2"},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    primary = _write(tmp_path / "session.jsonl", _calls(TEXT, a2), id="p", createdAt=1)
    child = _write(tmp_path / "session.1.jsonl", _calls(SECOND, b2), id="c", createdAt=2)
    client = ReplayModelClient(load_session_scripts(primary, [child]))
    assert [await _drain(client, s) for s in ("A", "B", "A", "B")] == [TEXT, SECOND, a2, b2]


async def test_more_live_sessions_than_recorded_fail_loud(tmp_path: Path) -> None:
    client = ReplayModelClient(
        load_session_scripts(_write(tmp_path / "session.jsonl", _calls(TEXT)))
    )
    assert await _drain(client, "first") == TEXT
    with pytest.raises(UnrecordedSessionError, match="all 1 recorded scripts are already bound"):
        await _drain(client, "second")


# describe('apply (the plugin entry)'): the settings the agent reads from its environment
def test_settings_read_the_fixture_override_and_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "session.1.jsonl", tmp_path / "session.2.jsonl"
    monkeypatch.setenv("DSH_SNAPSHOT_FILE", str(tmp_path / "session.jsonl"))
    monkeypatch.setenv("DSH_SNAPSHOT_OVERRIDE", str(tmp_path / "replay.override.json"))
    monkeypatch.setenv("DSH_SNAPSHOT_CHILD_FILES", f"{a}:{b}")
    settings = ReplaySettings()  # pyright: ignore[reportCallIssue]
    assert settings.snapshot_file == tmp_path / "session.jsonl"
    assert settings.snapshot_override == tmp_path / "replay.override.json"
    assert settings.child_files == (a, b)


@pytest.mark.parametrize("children", ["", None])
def test_settings_without_override_or_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, children: str | None
) -> None:
    monkeypatch.setenv("DSH_SNAPSHOT_FILE", str(tmp_path / "session.jsonl"))
    monkeypatch.delenv("DSH_SNAPSHOT_OVERRIDE", raising=False)
    if children is None:
        monkeypatch.delenv("DSH_SNAPSHOT_CHILD_FILES", raising=False)
    else:
        monkeypatch.setenv("DSH_SNAPSHOT_CHILD_FILES", children)
    settings = ReplaySettings()  # pyright: ignore[reportCallIssue]
    assert (settings.snapshot_override, settings.child_files) == (None, ())


@pytest.mark.parametrize("value", [None, ""])
def test_a_missing_or_empty_fixture_path_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("DSH_SNAPSHOT_FILE", raising=False)
    else:
        monkeypatch.setenv("DSH_SNAPSHOT_FILE", value)
    with pytest.raises(ReplayError, match="DSH_SNAPSHOT_FILE"):
        ReplayModelClient.from_settings()

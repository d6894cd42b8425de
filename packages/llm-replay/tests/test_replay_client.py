"""The replay client: binding, streaming chunks/throw/hang, call errors, consumption, report."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh_core import Chunk, ModelClient, ModelError, ModelRequest
from dsh_llm_replay import (
    ChunksEntry,
    HangEntry,
    NotConsumedError,
    ReplayCallError,
    ReplayEntry,
    ReplayError,
    ReplayHeader,
    ReplayModelClient,
    ReplayReport,
    ReportFormatError,
    ScriptExhaustedError,
    SessionScript,
    ThrowEntry,
    UnrecordedSessionError,
    check_report,
    load_session_scripts,
)

pytestmark = pytest.mark.anyio


def said(text: str) -> ChunksEntry:
    return ChunksEntry(
        (
            {"type": "text-delta", "index": 0, "text": text},
            {"type": "finish", "reason": {"kind": "stop"}},
        )
    )


def script(source: str, *entries: ReplayEntry, created_at: int = 0) -> SessionScript:
    return SessionScript(source, ReplayHeader(f"rec-{source}", created_at), tuple(entries))


def request(session_id: str) -> ModelRequest:
    return ModelRequest(session_id=session_id, messages=[])


async def call(client: ReplayModelClient, session_id: str) -> list[Chunk]:
    return [chunk async for chunk in client.stream(request(session_id))]


async def text(client: ReplayModelClient, session_id: str) -> str:
    chunks = await call(client, session_id)
    return "".join(str(c.get("text", "")) for c in chunks if c["type"] == "text-delta")


async def test_replay_client_is_a_model_client() -> None:
    client = ReplayModelClient([])
    assert isinstance(client, ModelClient)
    await client.aclose()


async def test_replay_sessions_bind_in_first_call_order() -> None:
    client = ReplayModelClient(
        [
            script("parent", said("p1"), said("p2")),
            script("child-a", said("a1")),
            script("child-b", said("b1")),
        ]
    )
    assert await text(client, "live-parent") == "p1"
    assert await text(client, "live-x") == "a1"  # the second new session gets the second script
    assert await text(client, "live-parent") == "p2"  # each session keeps its own cursor
    assert await text(client, "live-y") == "b1"
    client.assert_consumed()
    report = client.report().as_json()
    assert [(s["source"], s["boundSession"], s["replayedCalls"]) for s in report["scripts"]] == [
        ("parent", "live-parent", 2),
        ("child-a", "live-x", 1),
        ("child-b", "live-y", 1),
    ]
    assert report["ok"]
    assert report["errors"] == report["problems"] == []


async def test_replay_binding_happens_at_call_time_not_iteration() -> None:
    client = ReplayModelClient([script("first", said("1")), script("second", said("2"))])
    early = client.stream(request("early"))
    late = client.stream(request("late"))
    assert [c.get("text") async for c in late] == ["2", None]
    assert [c.get("text") async for c in early] == ["1", None]


async def test_replay_chunks_are_the_scripts_own_dicts() -> None:
    entry = said("x")
    client = ReplayModelClient([script("s", entry)])
    chunks = await call(client, "a")
    assert all(a is b for a, b in zip(chunks, entry.chunks, strict=True))


async def test_replay_exhausted_script_raises_a_model_error_and_is_recorded() -> None:
    client = ReplayModelClient([script("session.jsonl", said("only"))])
    await call(client, "live-1")
    with pytest.raises(ScriptExhaustedError) as info:
        await call(client, "live-1")
    error = info.value
    assert isinstance(error, ModelError)
    assert isinstance(error, ReplayCallError)
    assert str(error).startswith(
        "session live-1 (script session.jsonl) made call 2 but its script has 1 entries"
    )
    assert (error.code, error.call, error.length) == ("SCRIPT_EXHAUSTED", 2, 1)
    assert client.errors == (error,)
    with pytest.raises(NotConsumedError, match="made call 2 but its script has 1 entries"):
        client.assert_consumed()
    report = client.report().as_json()
    assert report["errors"] == [
        {"kind": "script-exhausted", "sessionId": "live-1", "message": str(error)}
    ]
    assert report["scripts"][0]["replayedCalls"] == 1
    assert report["sessions"] == [{"sessionId": "live-1", "script": "session.jsonl", "calls": 2}]


async def test_replay_unrecorded_session_names_the_bound_scripts() -> None:
    client = ReplayModelClient(
        [script("session.jsonl", said("p")), script("session.1.jsonl", said("c"))]
    )
    await call(client, "live-p")
    await call(client, "live-c")
    with pytest.raises(UnrecordedSessionError) as info:
        await call(client, "live-extra")
    assert str(info.value).startswith(
        "session live-extra made a model call but all 2 recorded scripts are already bound: "
        "session.jsonl -> live-p, session.1.jsonl -> live-c"
    )
    assert info.value.code == "UNRECORDED_SESSION"
    with pytest.raises(UnrecordedSessionError):  # and again: it never claims a script
        await call(client, "live-extra")
    report = client.report().as_json()
    assert [e["kind"] for e in report["errors"]] == ["unrecorded-session"] * 2
    assert report["sessions"][-1] == {"sessionId": "live-extra", "script": None, "calls": 2}
    assert not report["ok"]


async def test_replay_assert_consumed_names_unbound_scripts_and_short_sessions() -> None:
    client = ReplayModelClient(
        [
            script("session.jsonl", said("1"), said("2"), said("3")),
            script("session.1.jsonl", said("c")),
            script("session.2.jsonl", said("d"), said("e")),
        ]
    )
    await call(client, "live-p")
    await call(client, "live-c")
    with pytest.raises(NotConsumedError) as info:
        client.assert_consumed()
    assert info.value.problems == (
        "script session.2.jsonl (recorded session rec-session.2.jsonl, 2 calls) was never "
        "bound to a live session",
        "session live-p (script session.jsonl) made 1 of 3 recorded calls",
    )
    assert "2 problem(s)" in str(info.value)
    assert client.report().as_json()["problems"] == list(info.value.problems)


async def test_replay_a_recording_without_calls_needs_no_binding() -> None:
    # june/handshake: a session created and never prompted records no model call.
    client = ReplayModelClient([script("session.jsonl")])
    client.assert_consumed()
    assert client.report().as_json()["problems"] == []


async def test_replay_throw_yields_its_chunks_then_raises() -> None:
    chunk: Chunk = {"type": "text-delta", "index": 0, "text": "half"}
    client = ReplayModelClient(
        [
            script(
                "s",
                ThrowEntry((chunk,), "rate limited", "RATE", 429),
                ThrowEntry((), "no status", "X"),
            )
        ]
    )
    got: list[Chunk] = []
    with pytest.raises(ModelError) as info:
        await collect(client.stream(request("a")), got)
    assert got == [chunk]
    assert (info.value.message, info.value.code, info.value.status) == ("rate limited", "RATE", 429)
    assert not isinstance(info.value, ReplayCallError)  # a scripted failure, not a replay bug
    with pytest.raises(ModelError) as second:
        await call(client, "a")
    assert (second.value.code, second.value.status) == ("X", None)
    client.assert_consumed()


async def collect(stream: AsyncIterator[Chunk], into: list[Chunk]) -> None:
    async for chunk in stream:
        into.append(chunk)


async def consume_hang(
    client: ReplayModelClient,
    seen: list[Chunk],
    started: asyncio.Event,
) -> None:
    async for chunk in client.stream(request("hanger")):
        seen.append(chunk)
        if len(seen) == 2:
            started.set()


async def test_replay_hang_yields_partial_text_then_waits_for_cancel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ready = tmp_path / "ready"
    client = ReplayModelClient([script("s", HangEntry("ready"), said("after"))])
    seen: list[Chunk] = []
    started = asyncio.Event()
    task = asyncio.create_task(consume_hang(client, seen, started))
    await started.wait()
    for _ in range(20):  # let the stream run as far as it ever will
        await asyncio.sleep(0)
    assert not task.done()
    assert ready.exists()
    assert ready.stat().st_size == 0
    assert seen == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "partial"},
    ]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await text(client, "hanger") == "after"  # the cursor moved past the hang
    client.assert_consumed()


async def test_replay_hang_without_ready_file_writes_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    client = ReplayModelClient([script("s", HangEntry())])
    seen: list[Chunk] = []
    started = asyncio.Event()
    task = asyncio.create_task(consume_hang(client, seen, started))
    await started.wait()
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert list(tmp_path.iterdir()) == []  # noqa: ASYNC240


async def test_replay_report_round_trips_through_a_file(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    client = ReplayModelClient([script("session.jsonl", said("a"))], report_path=path)
    await call(client, "live")
    await client.aclose()  # writes the report
    on_disk: dict[str, Any] = json.loads(path.read_text())
    assert on_disk == client.report().as_json()
    assert on_disk["version"] == 1
    assert on_disk["scripts"][0]["recordedSessionId"] == "rec-session.jsonl"  # camelCase keys
    assert check_report(path) == client.report() == ReplayReport.read(path)
    assert check_report(on_disk) == client.report()
    assert ReplayReport.read(path).replayed_calls == 1
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # noqa: ASYNC240 - no temp


async def test_replay_check_report_raises_what_assert_consumed_would(tmp_path: Path) -> None:
    client = ReplayModelClient(
        [script("session.jsonl", said("a"), said("b")), script("session.1.jsonl", said("c"))]
    )
    await call(client, "live")
    client.write_report(tmp_path / "r.json")
    with pytest.raises(NotConsumedError) as from_file:
        check_report(tmp_path / "r.json")
    with pytest.raises(NotConsumedError) as direct:
        client.assert_consumed()
    assert from_file.value.problems == direct.value.problems
    assert len(direct.value.problems) == 2


@pytest.mark.parametrize(
    ("content", "field", "reason"),
    [
        (None, "document", "cannot read the replay report"),
        ("{", "document", "not valid JSON"),
        ('{"version": 1}', "ok", "not a replay report: Field required"),
        (
            '{"version": 1, "ok": true, "scripts": [], "sessions": [], "errors": [], '
            '"problems": [], "extra": 1}',
            "extra",
            "not a replay report: Extra inputs",
        ),
        (
            '{"version": 1, "ok": true, "scripts": [], "sessions": [{"sessionId": "x", '
            '"script": null, "calls": "1"}], "errors": [], "problems": []}',
            "sessions.0.calls",
            "not a replay report: Input should be a valid integer",
        ),
        (
            '{"version": 1, "ok": true, "scripts": [{"source": "s", "recordedSessionId": "r", '
            '"createdAt": 0, "seedLength": 0, "recordedCalls": 1, "boundSession": null}], '
            '"sessions": [], "errors": [], "problems": []}',
            "scripts.0.replayedCalls",
            "not a replay report: Field required",
        ),
        (
            '{"version": 9, "ok": true, "scripts": [], "sessions": [], "errors": [], '
            '"problems": []}',
            "version",
            "version 9 is not 1",
        ),
    ],
)
async def test_replay_check_report_rejects_bad_reports(
    tmp_path: Path, content: str | None, field: str, reason: str
) -> None:
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    for read in (check_report, ReplayReport.read):
        with pytest.raises(ReportFormatError) as info:
            read(path)
        assert isinstance(info.value, ReplayError)
        assert not isinstance(info.value, NotConsumedError)
        # The error names the file and the field, and says what is wrong.
        assert (info.value.path, info.value.field) == (str(path), field)
        assert reason in info.value.reason
        assert str(info.value).startswith(f"{path}: {field}: ")


async def test_replay_report_is_written_once_by_the_client(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    client = ReplayModelClient([script("session.jsonl", said("a"))], report_path=path)
    await call(client, "live")
    await client.aclose()
    written = path.read_text()
    path.unlink()
    await client.aclose()  # a second close leaves the report alone
    assert not path.exists()
    path.write_text(written)
    assert ReplayReport.read(path).replayed_calls == 1


@pytest.mark.corpus
async def test_replay_june_fork_scenario_end_to_end(corpus: Path) -> None:
    folder = corpus / "june" / "subagent-fork"
    client = ReplayModelClient(
        load_session_scripts(folder / "session.jsonl", [folder / "session.1.jsonl"])
    )
    parent_calls = len(client.scripts[0].entries)
    assert await text(client, "parent") == "OK"
    for _ in range(parent_calls - 2):
        await call(client, "parent")
    assert await text(client, "fork-child") == "MARMALADE"
    await call(client, "parent")
    client.assert_consumed()

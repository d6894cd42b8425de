"""Normalisation makes two runs comparable and treats both sides alike."""

from __future__ import annotations

import json
from typing import Any

from dsh_snapshot import CWD, SESSION_ID, Normalizer, normalize_frames, normalize_log_text

SID = "b8c052fd-b33f-475a-8a0c-bc3b75527602"
CHILD = "906f1eac-a457-4eb9-828b-1ba537552524"


def _log(*rows: dict[str, Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_header_and_events_lose_times_ids_and_cwd() -> None:
    text = _log(
        {
            "type": "session",
            "version": 0,
            "id": CHILD,
            "createdAt": 1781834679270,
            "cwd": "/tmp/run-1/cwd",
            "parentSession": SID,
            "seedLength": 3,
        },
        {
            "type": "turn/start",
            "seq": 0,
            "time": 1781834679273,
            "data": {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}},
        },
        {
            "type": "tool/result",
            "seq": 1,
            "time": 17,
            "data": {
                "turn": 1,
                "step": 1,
                "callId": "c1",
                "isError": False,
                "content": [{"type": "text", "text": "pwd is /tmp/run-1/cwd/sub"}],
            },
        },
    )
    rows = normalize_log_text(text, "x.jsonl", Normalizer(["/tmp/run-1/cwd"]))
    assert rows[0] == {
        "type": "session",
        "version": 0,
        "id": SESSION_ID,
        "createdAt": 0,
        "cwd": CWD,
        "parentSession": SESSION_ID,
        "seedLength": 3,
    }
    assert rows[1]["time"] == 0
    assert rows[2]["data"]["content"][0]["text"] == f"pwd is {CWD}/sub"


def test_missing_seq_time_and_packed_rows_compare_as_logical_events() -> None:
    header = {"type": "session", "version": 0, "id": SID, "createdAt": 5}
    full = _log(
        header,
        {
            "type": "assistant/chunk",
            "seq": 0,
            "time": 10,
            "data": {
                "turn": 1,
                "step": 1,
                "chunk": {"type": "text-delta", "index": 0, "text": "a"},
            },
        },
        {
            "type": "assistant/chunk",
            "seq": 1,
            "time": 12,
            "data": {
                "turn": 1,
                "step": 1,
                "chunk": {"type": "text-delta", "index": 0, "text": "b"},
            },
        },
    )
    packed = _log(
        header,
        {
            "type": "text-chunks",
            "seq0": 0,
            "time0": 10,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [2], "texts": ["a", "b"]},
        },
    )
    bare = _log(
        header,
        {
            "type": "assistant/chunk",
            "data": {
                "turn": 1,
                "step": 1,
                "chunk": {"type": "text-delta", "index": 0, "text": "a"},
            },
        },
        {
            "type": "assistant/chunk",
            "data": {
                "turn": 1,
                "step": 1,
                "chunk": {"type": "text-delta", "index": 0, "text": "b"},
            },
        },
    )
    norm = Normalizer()
    expected = normalize_log_text(full, "full", norm)
    assert normalize_log_text(packed, "packed", norm) == expected
    assert normalize_log_text(bare, "bare", norm) == expected


def test_placeholders_are_left_alone_so_both_sides_meet() -> None:
    norm = Normalizer(["/tmp/x"], [SID])
    assert norm.text("{{sessionId}} in {{cwd}}") == "{{sessionId}} in {{cwd}}"
    assert norm.text(f"{SID} in /tmp/x") == "{{sessionId}} in {{cwd}}"


def test_non_uuid_session_ids_are_replaced_when_known() -> None:
    assert Normalizer(session_ids=["sess_42"]).text("id sess_42") == f"id {SESSION_ID}"


def test_rpc_ids_renumbered_by_first_appearance() -> None:
    frames: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 7, "result": {}},
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID}},
        {"jsonrpc": "2.0", "id": "abc", "result": {"sessionId": SID}},
        {"jsonrpc": "2.0", "id": 7, "result": {}},
    ]
    out = normalize_frames(frames, Normalizer())
    assert [f.get("id") for f in out] == [1, None, 2, 1]
    assert out[1]["params"]["sessionId"] == SESSION_ID
    assert out[2]["result"]["sessionId"] == SESSION_ID

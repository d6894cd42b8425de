"""The one normaliser keeps the session tree (our scheme) or flattens it (upstream's)."""

from __future__ import annotations

import json
from typing import Any

from dsh_core import (
    SESSION_ID,
    SessionLog,
    creation_order,
    log_normalizer,
    normalize_log,
    read_log,
    session_placeholder,
)
from dsh_core.testing import normalized_rows

PRIMARY = "b8c052fd-b33f-475a-8a0c-bc3b75527602"
FIRST = "906f1eac-a457-4eb9-828b-1ba537552524"
SECOND = "0a1b2c3d-0000-4000-8000-000000000002"


def _call(seq: int, call_id: str, prompt: str) -> dict[str, Any]:
    arguments = json.dumps({"description": "d", "prompt": prompt})
    data = {"turn": 1, "step": 1, "callId": call_id, "name": "subagent", "arguments": arguments}
    return {"type": "tool/call", "seq": seq, "time": 0, "data": data}


def _log(sid: str, created: int, parent: str | None = None, prompt: str = "") -> SessionLog:
    header: dict[str, Any] = {"type": "session", "version": 0, "id": sid, "createdAt": created}
    rows: list[dict[str, Any]] = [header]
    if parent is not None:
        header["parentSession"] = parent
        rows.append(
            {
                "type": "user/message",
                "seq": 0,
                "time": created,
                "data": {"content": [{"type": "text", "text": prompt}], "source": {"kind": "user"}},
            }
        )
    else:
        # The primary asks for DELTA first, then GAMMA: that is the children's creation order.
        rows += [_call(0, "c1", "DELTA"), _call(1, "c2", "GAMMA")]
    return read_log([json.dumps(r) for r in rows], sid)


def _headers(logs: list[SessionLog], *, tree: bool) -> list[dict[str, Any]]:
    norm = log_normalizer(logs, tree=tree)
    return [normalize_log(log, norm)[0] for log in logs]


def test_tree_scheme_names_sessions_by_creation_order_and_keeps_parent_links() -> None:
    # Same millisecond, ids sorting the other way: the spawning call's position decides.
    logs = creation_order(
        [_log(FIRST, 7, PRIMARY, "GAMMA"), _log(SECOND, 7, PRIMARY, "DELTA"), _log(PRIMARY, 5)]
    )
    assert [log.header.id for log in logs] == [PRIMARY, SECOND, FIRST]
    headers = _headers(logs, tree=True)
    assert [h["id"] for h in headers] == [session_placeholder(i) for i in range(3)]
    assert [h.get("parentSession") for h in headers] == [None, "{{session:0}}", "{{session:0}}"]


def test_a_child_linked_to_the_wrong_parent_differs_in_the_tree_scheme_only() -> None:
    right = creation_order(
        [_log(PRIMARY, 5), _log(SECOND, 6, PRIMARY, "DELTA"), _log(FIRST, 7, PRIMARY, "GAMMA")]
    )
    # The second child claims the first child as its parent.
    wrong = creation_order(
        [_log(PRIMARY, 5), _log(SECOND, 6, PRIMARY, "DELTA"), _log(FIRST, 7, SECOND, "GAMMA")]
    )
    assert _headers(right, tree=True)[2]["parentSession"] == "{{session:0}}"
    assert _headers(wrong, tree=True)[2]["parentSession"] == "{{session:1}}"
    # Upstream's flat scheme cannot tell them apart: every id is one placeholder.
    assert _headers(right, tree=False) == _headers(wrong, tree=False)
    assert _headers(wrong, tree=False)[2]["parentSession"] == SESSION_ID


def test_committed_placeholders_compare_verbatim() -> None:
    # A fixture whose child was hand-edited to point at {{session:2}} keeps saying so.
    fixture = [
        read_log(['{"type":"session","version":0,"id":"{{session:0}}","createdAt":0}'], "a"),
        read_log(
            [
                '{"type":"session","version":0,"id":"{{session:1}}","createdAt":0,'
                '"parentSession":"{{session:2}}"}'
            ],
            "b",
        ),
    ]
    headers = _headers(fixture, tree=True)
    assert [h["id"] for h in headers] == ["{{session:0}}", "{{session:1}}"]
    assert headers[1]["parentSession"] == "{{session:2}}"


def test_ids_inside_text_follow_their_session_and_unknown_uuids_stay_flat() -> None:
    other = "11111111-2222-4333-8444-555555555555"
    primary = read_log(
        [
            json.dumps({"type": "session", "version": 0, "id": PRIMARY, "createdAt": 1}),
            json.dumps(
                {
                    "type": "tool/result",
                    "data": {
                        "turn": 1,
                        "step": 1,
                        "callId": "c",
                        "isError": False,
                        "content": [{"type": "text", "text": f"{PRIMARY} {other}"}],
                    },
                }
            ),
        ],
        "p",
    )
    rows = normalize_log(primary, log_normalizer([primary], tree=True))
    assert rows[1]["data"]["content"][0]["text"] == "{{session:0}} {{sessionId}}"


def test_normalized_rows_keeps_upstreams_flat_scheme() -> None:
    child = _log(FIRST, 9, PRIMARY, "GAMMA")
    rows = normalized_rows(child.header, child.events)
    assert rows[0] == {
        "type": "session",
        "version": 0,
        "id": SESSION_ID,
        "createdAt": 0,
        "parentSession": SESSION_ID,
    }
    assert rows[1]["time"] == 0

"""A catalogue of damaged session logs every reader and store must refuse.

Each entry is a whole JSONL log (bytes) with one defect, the 1-based line the error must
name and the field it must name (``None`` when the line is not JSON at all). None of the
defects is a torn tail: where the damage sits on the last line, that line is complete and
parses, so a store must report it rather than cut it away.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

__all__ = ["DAMAGED_LOGS", "DAMAGED_SESSION_ID", "DamagedLog"]

DAMAGED_SESSION_ID = "damaged"


class DamagedLog(NamedTuple):
    """One catalogue entry: ``(id, data, line, field)``."""

    id: str
    data: bytes
    line: int
    field: str | None


_DROP = object()  # a key to remove, in _header and _packed


def _j(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _header(**changes: Any) -> dict[str, Any]:
    header: dict[str, Any] = {
        "type": "session",
        "version": 0,
        "id": DAMAGED_SESSION_ID,
        "createdAt": 1_780_000_000_000,
    }
    for key, value in changes.items():
        if value is _DROP:
            header.pop(key, None)
        else:
            header[key] = value
    return header


def _ev(seq: int, type: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": type, "seq": seq, "time": 1_780_000_000_000 + seq, "data": data}


def _body() -> list[dict[str, Any]]:
    """A complete turn (seq 0-5) and the start of another (6-7): lines 2-9 of a log."""
    return [
        _ev(
            0, "turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}
        ),
        _ev(
            1,
            "user/message",
            {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        ),
        _ev(2, "step/start", {"turn": 1, "step": 1}),
        _ev(
            3,
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "yo"}},
        ),
        _ev(4, "step/end", {"turn": 1, "step": 1}),
        _ev(5, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        _ev(
            6, "turn/start", {"turn": 2, "trigger": {"kind": "message", "source": {"kind": "user"}}}
        ),
        _ev(7, "step/start", {"turn": 2, "step": 1}),
    ]


def _log(header: Any = None, rows: list[Any] | None = None) -> bytes:
    """A log from a header object and rows; a ``bytes`` row is written verbatim."""
    lines = [header if isinstance(header, bytes) else _j(header or _header())]
    for row in _body() if rows is None else rows:
        lines.append(row if isinstance(row, bytes) else _j(row))
    return b"\n".join(lines) + b"\n"


def _replace(index: int, row: Any) -> list[Any]:
    """The body with row ``index`` (0-based, line ``index + 2``) replaced."""
    rows: list[Any] = list(_body())
    rows[index] = row
    return rows


def _packed(kind: str = "text-chunks", seq0: Any = 3, **data: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "turn": 1,
        "step": 1,
        "index": 0,
        "dt": [1, 2],
        "texts": ["a", "b", "c"],
    }
    if kind == "tool-call-chunks":
        base = {
            "turn": 1,
            "step": 1,
            "index": 1,
            "id": "call_1",
            "name": "bash",
            "dt": [1, 2],
            "args": ["{", "}", ""],
        }
    for key, value in data.items():
        if value is _DROP:
            base.pop(key, None)
        else:
            base[key] = value
    return {"type": kind, "seq0": seq0, "time0": 1_780_000_000_003, "data": base}


def _with_packed(row: dict[str, Any]) -> list[Any]:
    """Body where seq 3 (line 5) is a packed row of three members, renumbering the rest."""
    rows: list[Any] = list(_body()[:3])
    rows.append(row)
    for offset, later in enumerate(_body()[4:]):
        rows.append({**later, "seq": 6 + offset})
    return rows


def _catalogue() -> list[DamagedLog]:
    body = _body()
    cases: list[DamagedLog] = [
        # --- the header (line 1) ---------------------------------------------------------
        DamagedLog("empty-file", b"", 1, None),
        DamagedLog("only-blank-lines", b"\n\n  \n", 1, None),
        DamagedLog("truncated-header-alone", _j(_header())[:30], 1, None),
        DamagedLog("truncated-header", _log(_j(_header())[:30]), 1, None),
        DamagedLog("header-of-another-type", _log(body[0], body[1:]), 1, "type"),
        DamagedLog("header-type-sessions", _log(_header(type="sessions")), 1, "type"),
        DamagedLog("header-not-an-object", _log(b'["session",0]'), 1, None),
        DamagedLog("version-1", _log(_header(version=1)), 1, "version"),
        DamagedLog("version-string", _log(_header(version="0")), 1, "version"),
        DamagedLog("version-false", _log(_header(version=False)), 1, "version"),
        DamagedLog("version-float", _log(_header(version=0.0)), 1, "version"),
        DamagedLog("header-with-bom", b"\xef\xbb\xbf" + _log(), 1, None),
        DamagedLog("version-missing", _log(_header(version=_DROP)), 1, "version"),
        DamagedLog("id-missing", _log(_header(id=_DROP)), 1, "id"),
        DamagedLog("id-empty", _log(_header(id="")), 1, "id"),
        DamagedLog("createdAt-string", _log(_header(createdAt="2026-06-01")), 1, "createdAt"),
        DamagedLog("createdAt-negative", _log(_header(createdAt=-5)), 1, "createdAt"),
        DamagedLog("seedLength-negative", _log(_header(seedLength=-1)), 1, "seedLength"),
        DamagedLog("seedLength-float", _log(_header(seedLength=1.5)), 1, "seedLength"),
        DamagedLog("seedLength-bool", _log(_header(seedLength=True)), 1, "seedLength"),
        DamagedLog("seedLength-string", _log(_header(seedLength="3")), 1, "seedLength"),
        DamagedLog("seedLength-null", _log(_header(seedLength=None)), 1, "seedLength"),
        DamagedLog(
            "delegationDepth-negative", _log(_header(delegationDepth=-1)), 1, "delegationDepth"
        ),
        DamagedLog("cwd-null", _log(_header(cwd=None)), 1, "cwd"),
        DamagedLog("parentSession-number", _log(_header(parentSession=7)), 1, "parentSession"),
        DamagedLog("header-invalid-utf8", _log(_j(_header())[:-2] + b'\xff"}'), 1, None),
        # --- envelopes -----------------------------------------------------------------------
        DamagedLog(
            "seq-gap-before-last-turn-end", _log(rows=_replace(3, {**body[3], "seq": 4})), 5, "seq"
        ),
        DamagedLog(
            "seq-gap-after-last-turn-end", _log(rows=_replace(7, {**body[7], "seq": 8})), 9, "seq"
        ),
        DamagedLog(
            "seq-gap-on-first-event", _log(rows=_replace(0, {**body[0], "seq": 1})), 2, "seq"
        ),
        DamagedLog("duplicate-seq", _log(rows=_replace(2, {**body[2], "seq": 1})), 4, "seq"),
        DamagedLog("seq-string", _log(rows=_replace(2, {**body[2], "seq": "2"})), 4, "seq"),
        DamagedLog("time-string", _log(rows=_replace(2, {**body[2], "time": "now"})), 4, "time"),
        DamagedLog("type-missing", _log(rows=_replace(1, {"seq": 1, "data": {}})), 3, "type"),
        DamagedLog("type-empty", _log(rows=_replace(1, {**body[1], "type": ""})), 3, "type"),
        DamagedLog("data-not-object", _log(rows=_replace(1, {**body[1], "data": [1]})), 3, "data"),
        DamagedLog(
            "sourceEventSeqs-not-ints",
            _log(rows=_replace(1, {**body[1], "sourceEventSeqs": [0, "1"]})),
            3,
            "sourceEventSeqs",
        ),
        DamagedLog(
            "unparsable-line-in-the-middle",
            _log(rows=_replace(2, b'{"type":"step/start","seq":2,')),
            4,
            None,
        ),
        DamagedLog(
            "trailing-garbage-after-json", _log(rows=_replace(2, _j(body[2]) + b" x")), 4, None
        ),
        DamagedLog(
            "nan-in-data", _log(rows=_replace(2, _j(body[2])[:-2] + b',"x":NaN}}')), 4, None
        ),
        DamagedLog(
            "invalid-utf8-in-the-middle",
            _log(rows=_replace(1, _j(body[1]).replace(b"hi", b"h\xc3\x28"))),
            3,
            None,
        ),
        DamagedLog("second-header-mid-file", _log(rows=_replace(4, _header())), 6, "type"),
        DamagedLog("non-object-line", _log(rows=_replace(4, b"42")), 6, None),
        DamagedLog("array-line", _log(rows=_replace(4, b"[]")), 6, None),
        DamagedLog(
            "assistant-chunk-without-chunk",
            _log(rows=_replace(3, _ev(3, "assistant/chunk", {"turn": 1, "step": 1}))),
            5,
            "data.chunk",
        ),
        DamagedLog(
            "assistant-chunk-without-turn",
            _log(
                rows=_replace(
                    3,
                    _ev(
                        3,
                        "assistant/chunk",
                        {"step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}},
                    ),
                )
            ),
            5,
            "data.turn",
        ),
        # --- packed rows (line 5) --------------------------------------------------------
        DamagedLog(
            "packed-dt-wrong-length", _log(rows=_with_packed(_packed(dt=[1]))), 5, "data.dt"
        ),
        DamagedLog(
            "packed-dt-not-ints", _log(rows=_with_packed(_packed(dt=[1, "2"]))), 5, "data.dt"
        ),
        DamagedLog("packed-dt-missing", _log(rows=_with_packed(_packed(dt=_DROP))), 5, "data.dt"),
        DamagedLog(
            "packed-texts-not-strings",
            _log(rows=_with_packed(_packed(texts=["a", 1, "c"]))),
            5,
            "data.texts",
        ),
        DamagedLog(
            "packed-texts-empty", _log(rows=_with_packed(_packed(texts=[], dt=[]))), 5, "data.texts"
        ),
        DamagedLog(
            "packed-index-missing", _log(rows=_with_packed(_packed(index=_DROP))), 5, "data.index"
        ),
        DamagedLog(
            "packed-turn-string", _log(rows=_with_packed(_packed(turn="1"))), 5, "data.turn"
        ),
        DamagedLog("packed-seq0-gap", _log(rows=_with_packed(_packed(seq0=4))), 5, "seq0"),
        DamagedLog("packed-seq0-string", _log(rows=_with_packed(_packed(seq0="3"))), 5, "seq0"),
        DamagedLog(
            "packed-time0-float", _log(rows=_with_packed({**_packed(), "time0": 1.5})), 5, "time0"
        ),
        DamagedLog(
            "packed-data-not-object",
            _log(rows=_with_packed({**_packed(), "data": "abc"})),
            5,
            "data",
        ),
        DamagedLog(
            "tool-call-chunks-without-id",
            _log(rows=_with_packed(_packed("tool-call-chunks", id=_DROP))),
            5,
            "data.id",
        ),
        DamagedLog(
            "tool-call-chunks-name-not-string",
            _log(rows=_with_packed(_packed("tool-call-chunks", name=3))),
            5,
            "data.name",
        ),
        DamagedLog(
            "tool-call-chunks-args-missing",
            _log(rows=_with_packed(_packed("tool-call-chunks", args=_DROP))),
            5,
            "data.args",
        ),
        DamagedLog(
            "packed-row-next-seq-gap",
            _log(rows=[*_with_packed(_packed())[:4], {**body[4], "seq": 5}]),
            6,
            "seq",
        ),
    ]
    return cases


DAMAGED_LOGS: list[DamagedLog] = _catalogue()
"""Every damaged log, as ``(id, data, line, field)``; the session id in each header is
:data:`DAMAGED_SESSION_ID`."""

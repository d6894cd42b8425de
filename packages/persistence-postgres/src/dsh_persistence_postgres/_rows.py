"""Stored rows back to a header and events, naming the session and the row on any damage.

The rows hold DSH JSONL lines, so the core log reader validates them; what this module adds
is where: a hand-edited row is a :class:`~dsh_core.LogFormatError` whose source names the
server, schema, root and session, and whose field names the row (``events[seq=7]``, or
``events[seq=7].data`` when the line parses but a field is wrong).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dsh_core import Event, LogFormatError, SessionHeader, event_from_json, header_from_json

__all__ = ["events_from_rows", "header_from_text"]


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON: a row holding them was not written by a store
    raise ValueError(f"{name} is not valid JSON")


def _decode(text: str, source: str, field: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise LogFormatError(
            source, None, field, f"invalid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise LogFormatError(source, None, field, f"invalid JSON ({exc})") from None


def header_from_text(text: str, source: str) -> SessionHeader:
    """Validate a stored header line.

    Raises:
        LogFormatError: naming ``source`` and ``sessions.header`` (plus the header's field).
    """
    obj = _decode(text, source, "sessions.header")
    try:
        return header_from_json(obj, source, None)
    except LogFormatError as exc:
        field = "sessions.header" + (f".{exc.field}" if exc.field else "")
        raise LogFormatError(source, None, field, exc.reason) from None


def events_from_rows(
    rows: Sequence[tuple[Any, ...]], source: str, *, first: int = 0
) -> list[Event]:
    """Validate ``(seq, line)`` rows, ordered by seq, into events numbered from ``first``.

    Raises:
        LogFormatError: naming ``source`` and the row (``events[seq=N]``, and the field).
    """
    events: list[Event] = []
    expected = first
    for seq, line in rows:
        where = f"events[seq={seq}]"
        if seq != expected:
            raise LogFormatError(
                source, None, f"{where}.seq", f"seq gap: expected seq {expected}, found {seq}"
            )
        obj = _decode(str(line), source, where)
        try:
            decoded = event_from_json(obj, expected, source, None)
        except LogFormatError as exc:
            raise LogFormatError(
                source, None, where + (f".{exc.field}" if exc.field else ""), exc.reason
            ) from None
        if len(decoded) != 1:
            raise LogFormatError(
                source, None, f"{where}.type", "a packed row where one event belongs"
            )
        events.append(decoded[0])
        expected += 1
    return events

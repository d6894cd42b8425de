"""The compact JSON every store writes: one line per event, byte for byte what
``json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)`` gives.

Appending is dominated by encoding (issue #11): ``JSONEncoder.encode`` builds a new C encoder
and a circular-reference table on every call, and the envelope dict (``Event.to_json``) is
built only to be taken apart again. Here one C encoder is made once and called directly, and
the envelope of an ordinary event is formatted around the encoded ``data``. The output is the
same text the generic path gives (a test holds the two equal on the corpus and on awkward
values); values JSON cannot hold are refused as before.

Why not ``pydantic_core.to_json`` or orjson (both about 2x faster again on ``data``): they
write some floats differently (``1e16`` against Python's ``1e+16``), turn NaN into ``null``
instead of refusing it, and accept sets, bytes and datetimes that the reader would hand
back as other values; logs already written would no longer match a rewrite of themselves.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from json import encoder as _stdlib_encoder
from typing import Any, cast

from dsh_core._events import Event

__all__ = ["dumps_event", "dumps_event_lines", "dumps_json"]

_Chunks = Callable[[Any, int], Iterable[str]]


def _refuse(value: object) -> object:
    """What ``JSONEncoder.default`` does: anything JSON has no type for is an error."""
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _c_encoder() -> _Chunks | None:
    """The stdlib's C encoder with the log's settings, or ``None`` where there is none
    (PyPy, builds without ``_json``).

    No circular-reference table: it would be shared between threads (two writers encoding the
    same seed ``data`` at once would see a false cycle). A cycle instead recurses until
    Python's recursion limit, which :func:`dumps_json` reports as an error like any other.
    """
    make = cast(Callable[..., _Chunks] | None, getattr(_stdlib_encoder, "c_make_encoder", None))
    basestring = getattr(_stdlib_encoder, "c_encode_basestring", None)
    if make is None or basestring is None:
        return None
    # (markers, default, encoder, indent, key_separator, item_separator, sort_keys,
    #  skipkeys, allow_nan)
    return make(None, _refuse, basestring, None, ":", ",", False, False, False)


_CHUNKS = _c_encoder()
_GENERIC = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_STRING: Callable[[str], str] = getattr(
    _stdlib_encoder, "c_encode_basestring", _stdlib_encoder.py_encode_basestring
)


def dumps_json(value: Any) -> str:
    """``value`` as compact JSON text (non-ASCII kept, NaN and infinities refused).

    Raises:
        TypeError: a value JSON has no type for (a set, bytes, a function…).
        ValueError: NaN or an infinity, or a structure that contains itself (or is nested
            deeper than Python's recursion limit).
    """
    if _CHUNKS is None:
        return _GENERIC(value)
    if type(value) is str:
        return _STRING(value)
    try:
        return "".join(_CHUNKS(value, 0))
    except RecursionError:
        raise ValueError(
            "Circular reference detected (or nested deeper than the recursion limit)"
        ) from None


def dumps_event(event: Event) -> str:
    """One event line, without the newline (packed rows are never written).

    Raises:
        ValueError: the event carries a value JSON cannot hold, naming its type and seq
            (upstream's ``assertSerializable``); nothing is written.
    """
    try:
        kind, seq, time = event.type, event.seq, event.time
        if event.extra or type(kind) is not str or type(seq) is not int or type(time) is not int:
            # unknown envelope keys may shadow the known ones: let the dict decide, as before
            return dumps_json(event.to_json())
        line = f'{{"type":{_STRING(kind)},"seq":{seq},"time":{time},"data":{dumps_json(event.data)}'
        # upstream's order (its logs and its SQLite ``rowToEvent``): seqs, then the op
        if event.source_event_seqs is not None:
            line += f',"sourceEventSeqs":{dumps_json(event.source_event_seqs)}'
        if event.surface_op is not None:
            line += f',"surfaceOp":{dumps_json(event.surface_op)}'
        return line + "}"
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"event {event.type!r} at seq {event.seq} carries data that is not JSON: {exc}"
        ) from None


def dumps_event_lines(events: Sequence[Event]) -> bytes:
    """``events`` as the UTF-8 bytes of whole log lines, each ending in a newline
    (``b""`` for no events): what one batch appends to a JSONL log.

    Raises:
        ValueError: as :func:`dumps_event`; also text that cannot be UTF-8 (a lone surrogate).
    """
    if not events:
        return b""
    return ("\n".join([dumps_event(event) for event in events]) + "\n").encode("utf-8")

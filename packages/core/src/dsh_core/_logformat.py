"""Reading and writing the DSH session log format (version 0).

The reader is strict: anything it cannot read exactly is a :class:`LogFormatError` naming the
source, the line and the field. It accepts every era of the format: envelopes with or without
``seq``/``time``, unknown event types (kept as they are) and packed chunk rows, which are
storage only and expand into the ``assistant/chunk`` events they stand for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard, cast

from dsh_core._encode import dumps_event
from dsh_core._errors import LogFormatError
from dsh_core._events import (
    _SHARED_VALUE_CHARS,  # pyright: ignore[reportPrivateUsage]
    FORMAT_VERSION,
    Event,
    SessionHeader,
    event_from_raw,
)
from dsh_core._jsondepth import MAX_JSON_DEPTH, json_depth

__all__ = [
    "PACKED_ROW_TYPES",
    "SessionLog",
    "dumps_event",
    "dumps_header",
    "event_from_json",
    "header_from_json",
    "read_log",
    "read_log_bytes",
    "read_log_file",
    "read_log_stream",
    "read_log_text",
    "render_log",
]

PACKED_ROW_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
_ENVELOPE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"})
_HEADER_KEYS = frozenset(
    {
        "type",
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "seedLength",
        "origin",
        "delegationDepth",
    }
)


@dataclass(slots=True)
class SessionLog:
    """A parsed log: the header and the logical events (packed rows expanded)."""

    header: SessionHeader
    events: list[Event]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def header_from_json(obj: Any, source: str = "<text>", line: int | None = 1) -> SessionHeader:
    """Validate a decoded header object. ``version`` is checked before anything else."""
    if not isinstance(obj, dict):
        raise LogFormatError(source, line, None, "the header is not a JSON object")
    header: dict[str, Any] = obj  # pyright: ignore[reportUnknownVariableType]
    if "version" in header and (
        not _is_int(header["version"]) or header["version"] != FORMAT_VERSION
    ):
        raise LogFormatError(
            source,
            line,
            "version",
            f"unsupported log version {header['version']!r}; "
            f"this reader knows version {FORMAT_VERSION}",
        )
    if header.get("type") != "session":
        raise LogFormatError(
            source,
            line,
            "type",
            f"the first line must be a session header (type 'session'), "
            f"found type {header.get('type')!r}",
        )
    if "version" not in header:
        raise LogFormatError(source, line, "version", "the header has no version")
    session_id = header.get("id")
    if not isinstance(session_id, str) or not session_id:
        raise LogFormatError(source, line, "id", "the header id must be a non-empty string")
    created_at = header.get("createdAt")
    if not _is_int(created_at) or created_at < 0:
        raise LogFormatError(
            source,
            line,
            "createdAt",
            f"createdAt must be a non-negative integer (epoch ms), found {created_at!r}",
        )
    optional: dict[str, Any] = {}
    for key, attr in (("cwd", "cwd"), ("parentSession", "parent_session"), ("origin", "origin")):
        if key in header:
            if not isinstance(header[key], str):
                raise LogFormatError(
                    source, line, key, f"{key} must be a string, found {header[key]!r}"
                )
            optional[attr] = header[key]
    for key, attr in (("seedLength", "seed_length"), ("delegationDepth", "delegation_depth")):
        if key in header:
            value = header[key]
            if not _is_int(value) or value < 0:
                raise LogFormatError(
                    source, line, key, f"{key} must be a non-negative integer, found {value!r}"
                )
            optional[attr] = value
    extra = {k: v for k, v in header.items() if k not in _HEADER_KEYS}
    return SessionHeader(
        id=session_id, created_at=created_at, version=FORMAT_VERSION, extra=extra, **optional
    )


def _expand_packed(
    row: dict[str, Any], data: dict[str, Any], seq: int, source: str, line: int | None
) -> list[Event]:
    kind = row["type"]
    for key in ("turn", "step", "index"):
        if not _is_int(data.get(key)):
            raise LogFormatError(
                source, line, f"data.{key}", f"a {kind} row needs an integer {key}"
            )
    members_key = "args" if kind == "tool-call-chunks" else "texts"
    members = data.get(members_key)
    if not isinstance(members, list) or not members:
        raise LogFormatError(
            source, line, f"data.{members_key}", f"a {kind} row needs a non-empty list of strings"
        )
    if not all(isinstance(m, str) for m in members):  # pyright: ignore[reportUnknownVariableType]
        raise LogFormatError(
            source, line, f"data.{members_key}", f"every member of {members_key} must be a string"
        )
    dt = data.get("dt")
    if not isinstance(dt, list) or not all(_is_int(d) for d in dt):  # pyright: ignore
        raise LogFormatError(source, line, "data.dt", "dt must be a list of integers")
    texts: list[str] = members  # pyright: ignore[reportUnknownVariableType]
    deltas: list[int] = dt  # pyright: ignore[reportUnknownVariableType]
    if len(deltas) != len(texts) - 1:
        raise LogFormatError(
            source,
            line,
            "data.dt",
            f"dt has {len(deltas)} entries; a row of {len(texts)} members needs {len(texts) - 1}",
        )
    seq0 = row.get("seq0", seq)
    if not _is_int(seq0):
        raise LogFormatError(source, line, "seq0", f"seq0 must be an integer, found {seq0!r}")
    if seq0 != seq:
        raise LogFormatError(
            source, line, "seq0", f"seq gap: expected seq {seq}, the row starts at {seq0}"
        )
    time = row.get("time0", 0)
    if not _is_int(time):
        raise LogFormatError(source, line, "time0", f"time0 must be an integer, found {time!r}")
    turn, step, index = data["turn"], data["step"], data["index"]
    if kind == "tool-call-chunks":
        call_id = data.get("id")
        if not isinstance(call_id, str):
            raise LogFormatError(source, line, "data.id", "a tool-call-chunks row needs an id")
        name = data.get("name")
        if "name" in data and not isinstance(name, str):
            raise LogFormatError(source, line, "data.name", "name must be a string")
    else:
        call_id = name = None
    delta_type = "text-delta" if kind == "text-chunks" else "reasoning-delta"
    out: list[Event] = []
    for k, text in enumerate(texts):
        if k:
            time += deltas[k - 1]
        if kind == "tool-call-chunks":
            chunk: dict[str, Any] = {"type": "tool-call-delta", "index": index, "id": call_id}
            if "name" in data:
                chunk["name"] = name
            chunk["argumentsDelta"] = text
        else:
            chunk = {"type": delta_type, "index": index, "text": text}
        out.append(
            Event("assistant/chunk", seq + k, time, {"turn": turn, "step": step, "chunk": chunk})
        )
    return out


def event_from_json(
    obj: Any, expected_seq: int, source: str = "<text>", line: int | None = None
) -> list[Event]:
    """Validate one decoded event row; a packed row yields its members, others one event.

    Raises:
        LogFormatError: the row is not an event, or its ``seq`` does not equal ``expected_seq``.
    """
    if not isinstance(obj, dict):
        raise LogFormatError(source, line, None, "an event must be a JSON object")
    row: dict[str, Any] = obj  # pyright: ignore[reportUnknownVariableType]
    kind = row.get("type")
    if not isinstance(kind, str) or not kind:
        raise LogFormatError(source, line, "type", "an event needs a non-empty string type")
    if kind == "session":
        raise LogFormatError(source, line, "type", "a second session header inside the log")
    raw_data = row.get("data")
    if not isinstance(raw_data, dict):
        raise LogFormatError(source, line, "data", f"a {kind} event needs an object data")
    data: dict[str, Any] = raw_data  # pyright: ignore[reportUnknownVariableType]
    if kind in PACKED_ROW_TYPES:
        return _expand_packed(row, data, expected_seq, source, line)
    seq = row.get("seq", expected_seq)
    if not _is_int(seq):
        raise LogFormatError(source, line, "seq", f"seq must be an integer, found {seq!r}")
    if seq != expected_seq:
        raise LogFormatError(
            source, line, "seq", f"seq gap: expected seq {expected_seq}, found {seq}"
        )
    time = row.get("time", 0)
    if not _is_int(time):
        raise LogFormatError(source, line, "time", f"time must be an integer, found {time!r}")
    if kind == "assistant/chunk":
        chunk = data.get("chunk")
        if not isinstance(chunk, dict) or not isinstance(chunk.get("type"), str):  # pyright: ignore
            raise LogFormatError(
                source,
                line,
                "data.chunk",
                "an assistant/chunk needs a chunk object with a string type",
            )
        if not _is_int(data.get("turn")) or not _is_int(data.get("step")):
            raise LogFormatError(
                source, line, "data.turn", "an assistant/chunk needs integer turn and step"
            )
    seqs = row.get("sourceEventSeqs")
    if seqs is not None and (not isinstance(seqs, list) or not all(_is_int(s) for s in seqs)):  # pyright: ignore
        raise LogFormatError(
            source, line, "sourceEventSeqs", "sourceEventSeqs must be a list of integers"
        )
    extra = {k: v for k, v in row.items() if k not in _ENVELOPE_KEYS} or None
    return [Event(kind, seq, time, data, row.get("surfaceOp"), seqs, extra)]  # pyright: ignore


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity, which are not JSON and could not be written back
    raise ValueError(f"{name} is not valid JSON")


def _too_deep(text: str, source: str, number: int) -> None:
    """A line nested deeper than ``MAX_JSON_DEPTH`` is an error naming it, never a crash of
    whatever walks it later (two C counts per line; the depth walk only for bracket-heavy
    lines)."""
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and json_depth(text) > MAX_JSON_DEPTH:
        raise LogFormatError(source, number, None, f"JSON nested deeper than {MAX_JSON_DEPTH}")


def _decode(line_text: str, source: str, number: int) -> Any:
    _too_deep(line_text, source, number)
    try:
        return json.loads(line_text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise LogFormatError(
            source, number, None, f"invalid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise LogFormatError(source, number, None, f"invalid JSON ({exc})") from None


def read_log(lines: Iterable[str], source: str = "<text>") -> SessionLog:
    """Parse a log given as lines (without or with their newlines).

    Blank lines are skipped; line numbers in errors are physical (1-based).

    Raises:
        LogFormatError: naming the source, line and field of the first problem.
    """
    numbered: Iterator[tuple[int, str]] = enumerate(lines, 1)
    header: SessionHeader | None = None
    for number, text in numbered:
        if text.strip():
            header = header_from_json(_decode(text, source, number), source, number)
            break
    if header is None:
        raise LogFormatError(source, 1, None, "the log is empty: no session header")
    events: list[Event] = []
    for number, text in numbered:
        if not text.strip():
            continue
        events.extend(event_from_json(_decode(text, source, number), len(events), source, number))
    return SessionLog(header, events)


class _Irregular(Exception):
    """The text needs the line-by-line reader (blank lines, CRLF, bad JSON, ...)."""


# The C scanner behind ``json.loads``: calling it at an offset decodes one value straight out
# of the whole text, skipping the per-line split, ``loads`` wrapper and whitespace regexes.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_scan_once: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # pyright: ignore
_FAST_SKIP = PACKED_ROW_TYPES | {"session", ""}
# One encoder for every line written: ``json.dumps`` with arguments builds a new one per call,
# which is a measurable share of an append (issue #11); the output is the same. NaN and
# infinities are not JSON: a line holding one would read back as a torn tail, so they are refused.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def _read_log_fast(text: str, source: str) -> SessionLog:
    scan = _scan_once
    size = len(text)
    try:
        obj, end = scan(text, 0)
    except (StopIteration, ValueError, RecursionError):
        raise _Irregular from None
    if end < size and text[end] != "\n":
        raise _Irregular
    _too_deep(text[:end], source, 1)
    header = header_from_json(obj, source, 1)
    events: list[Event] = []
    append = events.append
    pos, number = end + 1, 1
    while pos < size:
        number += 1
        try:
            row, end = scan(text, pos)
        except (StopIteration, ValueError, RecursionError):
            raise _Irregular from None  # the line-by-line path names the line and why
        if end < size and text[end] != "\n":
            raise _Irregular
        if text.count("[", pos, end) + text.count("{", pos, end) > MAX_JSON_DEPTH:
            _too_deep(text[pos:end], source, number)
        pos = end + 1
        expected = len(events)
        # The common row ({type, seq, time, data}, seq in order, not packed) is checked inline
        # exactly as event_from_json would; anything else takes the full path.
        if row.__class__ is dict and len(row) == 4:
            kind, seq, time = row.get("type"), row.get("seq"), row.get("time")
            data = row.get("data")
            if (
                seq == expected
                and seq.__class__ is int
                and time.__class__ is int
                and data.__class__ is dict
                and kind.__class__ is str
                and kind not in _FAST_SKIP
            ):
                if kind != "assistant/chunk":
                    append(Event(kind, seq, time, data))
                    continue
                chunk = data.get("chunk")
                if (
                    chunk.__class__ is dict
                    and chunk.get("type").__class__ is str
                    and data.get("turn").__class__ is int
                    and data.get("step").__class__ is int
                ):
                    append(Event(kind, seq, time, data))
                    continue
        events.extend(event_from_json(row, expected, source, number))
    return SessionLog(header, events)


def read_log_text(text: str, source: str = "<text>") -> SessionLog:
    """Parse a whole log held in one string; the same result and errors as :func:`read_log`.

    Regular logs (``\\n``-separated lines, no blank lines) are decoded in one pass over the
    text, about twice as fast as line by line; anything else falls back to :func:`read_log`.

    Raises:
        LogFormatError: naming the source, line and field of the first problem.
    """
    try:
        return _read_log_fast(text, source)
    except _Irregular:
        return read_log(text.split("\n"), source)


def read_log_bytes(data: bytes, source: str = "<bytes>") -> SessionLog:
    """Parse a log from raw bytes (as :func:`read_log_text`); invalid UTF-8 is an error
    naming its line, reported before any JSON is looked at."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise LogFormatError(source, line, None, f"invalid UTF-8 at byte {exc.start}") from None
    return read_log_text(text, source)


def read_log_file(path: Path | str) -> SessionLog:
    """Read and parse a whole log file, named by its path in every error.

    Raises:
        LogFormatError: the log is invalid (naming the file, line and field).
        OSError: the file cannot be read (``FileNotFoundError`` when it is missing).
    """
    return read_log_bytes(Path(path).read_bytes(), str(path))


def _sharing_decoder() -> tuple[Callable[[str, int], tuple[Any, int]], Callable[[str], Any]]:
    """A scanner and a ``loads`` whose objects share equal keys and short string values.

    ``json`` memoizes keys only within one call, so per-line parsing gives every event its own
    copies of ``"type"``, ``"turn"``, ``"chunk"``... The hook builds each object from its pairs
    exactly as the plain decoder does (insertion order of the first occurrence, last value
    wins) but through a per-read cache, so a log holds one copy of each.
    """
    memo: dict[str, str] = {}
    share = memo.setdefault
    limit = _SHARED_VALUE_CHARS

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        return {
            share(k, k): (share(v, v) if v.__class__ is str and len(v) <= limit else v)
            for k, v in pairs
        }

    decoder = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=hook)
    scan = cast("Callable[[str, int], tuple[Any, int]]", decoder.scan_once)  # pyright: ignore

    def loads(text: str) -> Any:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=hook)

    return scan, loads


def read_log_stream(lines: Iterable[bytes], source: str = "<bytes>") -> SessionLog:
    """Parse a log from its raw lines, one at a time, sharing repeated strings between events.

    ``lines`` are the physical lines as bytes with their newlines, as a binary file object
    yields them (byte offsets in UTF-8 errors count them), so the whole log is never held as
    text. The result equals that of
    :func:`read_log_bytes` on the joined bytes. An event written the way every store writes
    it keeps its ``data`` as the line's JSON text, decoded on first use
    (:func:`~dsh_core.event_from_raw`), which keeps a long log's memory near its size on disk;
    once decoded, equal dict keys and short string values are the same objects.

    Raises:
        LogFormatError: naming the source, line and field of the first problem in line order
            (invalid UTF-8 included, named by its line and byte offset). When a log has several
            problems, :func:`read_log_bytes` may name another one: it checks the UTF-8 of the
            whole log before any JSON.
    """
    scan, loads = _sharing_decoder()

    def parse(raw: bytes, number: int, offset: int) -> Any | None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LogFormatError(
                source, number, None, f"invalid UTF-8 at byte {offset + exc.start}"
            ) from None
        _too_deep(text, source, number)
        # The common line is one JSON value then its newline: the scanner alone decodes it to
        # what json.loads would. Anything else takes read_log's own per-line steps.
        try:
            obj, end = scan(text, 0)
        except (StopIteration, ValueError, RecursionError):
            pass
        else:
            size = len(text)
            if end == size or (end == size - 1 and text[end] == "\n"):
                return obj
        if text.endswith("\n"):
            text = text[:-1]  # as read_log sees the line: error columns count from its start
        if not text.strip():
            return None
        try:
            return loads(text)
        except json.JSONDecodeError as exc:
            raise LogFormatError(
                source, number, None, f"invalid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        except ValueError as exc:
            raise LogFormatError(source, number, None, f"invalid JSON ({exc})") from None

    header: SessionHeader | None = None
    events: list[Event] = []
    append = events.append
    kinds: dict[str, str] = {}  # one copy of each event type
    share = kinds.setdefault
    offset = 0
    for number, raw in enumerate(lines, 1):
        if header is not None:
            event = _lazy_event(raw, len(events), source, number, share)
            if event is not None:
                offset += len(raw)
                append(event)
                continue
        obj = parse(raw, number, offset)
        offset += len(raw)
        if obj is None:
            continue
        if header is None:
            header = header_from_json(obj, source, number)
        else:
            events.extend(event_from_json(obj, len(events), source, number))
    if header is None:
        raise LogFormatError(source, 1, None, "the log is empty: no session header")
    return SessionLog(header, events)


_TYPE_KEY = '{"type":'
_SEQ_KEY = ',"seq":'
_TIME_KEY = ',"time":'
_DATA_KEY = ',"data":'


def _lazy_event(
    raw: bytes, expected: int, source: str, number: int, share: Callable[[str, str], str]
) -> Event | None:
    """The event of ``raw`` with its ``data`` kept as JSON text (:func:`event_from_raw`), or
    ``None`` when the line is not the common one, for the full path to read and judge.

    The common line is exactly ``{"type":T,"seq":N,"time":T,"data":{…}}`` and a newline, as
    every store writes it: each value is decoded by the same scanner ``json.loads`` uses, in
    place, so the data's span is known exactly (a duplicate key or extra whitespace does not
    match and takes the full path) and the result is what the full path would build. The
    line is fully decoded and checked here; only the decoded ``data`` is dropped.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.startswith(_TYPE_KEY):
        return None
    size = len(text)
    tail = 2 if text.endswith("}\n") else 1 if text.endswith("}") else 0
    if not tail:
        return None
    scan = _scan_once
    try:
        kind, end = scan(text, 8)
        if kind.__class__ is not str or kind in _FAST_SKIP or not text.startswith(_SEQ_KEY, end):
            return None
        seq, end = scan(text, end + 7)
        if seq != expected or seq.__class__ is not int or not text.startswith(_TIME_KEY, end):
            return None
        time, end = scan(text, end + 8)
        if time.__class__ is not int or not text.startswith(_DATA_KEY, end):
            return None
        start = end + 8
        if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
            _too_deep(text, source, number)
        data, end = scan(text, start)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != size - tail or data.__class__ is not dict:
        return None
    if kind == "assistant/chunk":
        chunk = data.get("chunk")
        if not (
            chunk.__class__ is dict
            and chunk.get("type").__class__ is str
            and data.get("turn").__class__ is int
            and data.get("step").__class__ is int
        ):
            return None
    # byte offsets equal character offsets while the text before the data is ASCII
    first = start if text.isascii() or text[:start].isascii() else len(text[:start].encode())
    return event_from_raw(share(kind, kind), seq, time, raw[first : len(raw) - tail])


def dumps_header(header: SessionHeader) -> str:
    """One header line, without the newline."""
    return _ENCODE(header.to_json())


def render_log(header: SessionHeader, events: Iterable[Event]) -> str:
    """The whole log as JSONL text, one line per event, newline-terminated."""
    parts = [dumps_header(header)]
    parts.extend(dumps_event(e) for e in events)
    return "\n".join(parts) + "\n"

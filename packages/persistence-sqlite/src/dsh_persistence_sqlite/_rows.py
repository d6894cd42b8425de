"""Rows to events and headers and back, validating every column on the way in.

A row that cannot be turned back into exactly what was appended is a
:class:`~dsh_core.LogFormatError` naming the database file and the row and column
(``sessions.seed_length``, ``events[seq=7].data``): SQLite keeps whatever it is given, so a
damaged or hand-edited database is caught here rather than further up.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from dsh_core import Event, LogFormatError, SessionHeader, dumps_json, event_from_raw
from dsh_persistence_sqlite._schema import Layout

__all__ = [
    "events_select",
    "event_row",
    "event_side_rows",
    "events_from_cursor",
    "header_from_row",
    "header_row",
    "header_select",
    "header_side_row",
    "locate_undecodable",
]

# The columns a load reads, in the order :func:`header_from_row` / :func:`events_from_cursor`
# unpack; the last three header columns and the last event column come from the 1004
# layout's own columns, from a v4 file's side tables, or are NULL (absent).
_HEADER_V4 = "s.id, s.version, s.created_at, s.cwd, s.parent_session, s.seed_length"
_EVENT_V4 = "e.seq, e.type, e.time, e.data, e.source_event_seqs, e.surface_op"


def header_select(layout: Layout, side_tables: bool) -> str:
    """``SELECT … FROM`` the ``sessions`` rows (alias ``s``) :func:`header_from_row` unpacks."""
    if layout is Layout.DSH:
        return f"SELECT {_HEADER_V4}, s.origin, s.delegation_depth, s.extra FROM sessions s"
    if side_tables:
        return (
            f"SELECT {_HEADER_V4}, x.origin, x.delegation_depth, x.extra FROM sessions s "
            "LEFT JOIN dsh_sessions x ON x.session_id = s.id"
        )
    return f"SELECT {_HEADER_V4}, NULL, NULL, NULL FROM sessions s"


def events_select(layout: Layout, side_tables: bool, valid: str) -> str:
    """One session's ``events`` rows (alias ``e``, parameter: the id) in seq order, plus
    ``valid`` (``json_valid(e.data)`` or ``0``), as :func:`events_from_cursor` unpacks them."""
    if layout is Layout.DSH:
        source, extra = "events e", "e.extra"
    elif side_tables:
        source = "events e LEFT JOIN dsh_events x ON x.session_id = e.session_id AND x.seq = e.seq"
        extra = "x.extra"
    else:
        source, extra = "events e", "NULL"
    return (
        f"SELECT {_EVENT_V4}, {extra}, {valid} FROM {source} WHERE e.session_id = ? ORDER BY e.seq"
    )


# NaN and infinities are not JSON: SQLite would keep the text but no reader could load it.
# The log lines' own encoder, so a row's JSON is the text the JSONL store writes.
_encode = dumps_json
_loads = json.loads


def _dump_optional(value: Any) -> str | None:
    return None if value is None else _encode(value)


def header_row(header: SessionHeader, layout: Layout) -> tuple[Any, ...]:
    """The ``sessions`` row for ``header`` (unknown header keys go to ``extra`` as JSON;
    a v4 row has the first six columns only: the rest is :func:`header_side_row`)."""
    row = (
        header.id,
        header.version,
        header.created_at,
        header.cwd,
        header.parent_session,
        header.seed_length,
    )
    if layout is Layout.V4:
        return row
    return (
        *row,
        header.origin,
        header.delegation_depth,
        _encode(header.extra) if header.extra else None,
    )


def event_row(session_id: str, event: Event, layout: Layout) -> tuple[Any, ...]:
    """The ``events`` row for ``event``; JSON columns hold compact JSON text or NULL
    (a v4 row has no ``extra``: that is :func:`event_side_rows`).

    Raises:
        ValueError: the event carries a value JSON cannot hold (NaN, an object…), naming
            its type and seq (upstream's ``assertSerializable``); nothing is written.
    """
    try:
        row = (
            session_id,
            event.seq,
            event.type,
            event.time,
            _encode(event.data),
            _dump_optional(event.source_event_seqs),
            _dump_optional(event.surface_op),
        )
        if layout is Layout.V4:
            return row
        return (*row, _encode(event.extra) if event.extra else None)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"event {event.type!r} at seq {event.seq} carries data that is not JSON: {exc}"
        ) from None


def header_side_row(header: SessionHeader) -> tuple[Any, ...] | None:
    """A v4 file's ``dsh_sessions`` row for ``header``: what v4 has no column for, or
    ``None`` when there is nothing (a header upstream's v4 holds whole)."""
    if header.origin is None and header.delegation_depth is None and not header.extra:
        return None
    extra = _encode(header.extra) if header.extra else None
    return (header.id, header.origin, header.delegation_depth, extra)


def event_side_rows(session_id: str, events: Sequence[Event]) -> list[tuple[Any, ...]]:
    """A v4 file's ``dsh_events`` rows: each event's unknown envelope keys, as JSON.

    Raises:
        ValueError: an envelope key's value is not JSON, naming the event; nothing is written.
    """
    rows: list[tuple[Any, ...]] = []
    for event in events:
        if event.extra:
            try:
                rows.append((session_id, event.seq, _encode(event.extra)))
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"event {event.type!r} at seq {event.seq} carries an envelope field that "
                    f"is not JSON: {exc}"
                ) from None
    return rows


def _is_int(value: object) -> bool:
    return type(value) is int


def header_from_row(row: tuple[Any, ...], source: str) -> SessionHeader:
    """Validate one ``sessions`` row.

    Raises:
        LogFormatError: naming ``source`` and the column (``sessions.seed_length``…).
    """
    session_id, version, created_at, cwd, parent, seed_length, origin, depth, extra_text = row

    def fail(column: str, reason: str) -> LogFormatError:
        return LogFormatError(
            source, None, f"sessions.{column}", f"session {session_id!r}: {reason}"
        )

    if not isinstance(session_id, str) or not session_id:
        raise fail("id", f"the id must be a non-empty string, found {session_id!r}")
    if version != 0 or not _is_int(version):
        raise fail("version", f"unsupported log version {version!r}; this reader knows version 0")
    if not _is_int(created_at) or created_at < 0:
        raise fail(
            "created_at",
            f"created_at must be a non-negative integer (epoch ms), found {created_at!r}",
        )
    for column, value in (("cwd", cwd), ("parent_session", parent), ("origin", origin)):
        if value is not None and not isinstance(value, str):
            raise fail(column, f"{column} must be text or NULL, found {value!r}")
    for column, value in (("seed_length", seed_length), ("delegation_depth", depth)):
        if value is not None and (not _is_int(value) or value < 0):
            raise fail(column, f"{column} must be a non-negative integer or NULL, found {value!r}")
    extra: dict[str, Any] = {}
    if extra_text is not None:
        try:
            decoded = _loads(extra_text)
        except (ValueError, TypeError) as exc:
            raise fail("extra", f"invalid JSON ({exc})") from None
        if not isinstance(decoded, dict):
            raise fail("extra", "extra must be a JSON object")
        extra = decoded  # pyright: ignore[reportUnknownVariableType]
    return SessionHeader(
        id=session_id,
        created_at=created_at,
        version=version,
        cwd=cwd,
        parent_session=parent,
        seed_length=seed_length,
        origin=origin,
        delegation_depth=depth,
        extra=extra,
    )


def _decode_column(text: Any, source: str, seq: int, column: str) -> Any:
    try:
        return _loads(text)
    except (ValueError, TypeError) as exc:
        raise LogFormatError(
            source,
            None,
            f"events[seq={seq}].{column}",
            f"invalid JSON in the {column} column ({exc})",
        ) from None


CHUNK_ROWS = 256


def _bulk_data(rows: list[tuple[Any, ...]]) -> list[Any] | None:
    """Every ``data`` of a chunk from ONE ``json.loads``, or ``None`` to decode row by row.

    One call lets the decoder's key memo share each key string across the whole chunk
    (``"turn"``, ``"chunk"``… once, not once per event), which is most of the difference
    between a loaded log at ~4x and at ~6x its JSON size, and it is faster. The joined text
    splits back into exactly one value per row only if every row is valid JSON on its own:
    the query's last column is SQLite's ``json_valid(data)``, and any row that fails it (or a
    row Python's stricter decoder rejects) sends the chunk down the per-row path, which names
    the row.
    """
    for row in rows:
        if row[7] != 1:
            return None
    try:
        decoded = _loads("[" + ",".join([row[3] for row in rows]) + "]")
    except (ValueError, TypeError):
        return None
    return decoded if len(decoded) == len(rows) else None  # pyright: ignore[reportUnknownArgumentType]


def _row_data(row: tuple[Any, ...], source: str) -> Any:
    try:
        return _loads(row[3])
    except (ValueError, TypeError) as exc:
        raise LogFormatError(
            source, None, f"events[seq={row[0]}].data", f"invalid JSON in the data column ({exc})"
        ) from None


def events_from_cursor(
    cursor: sqlite3.Cursor, source: str, committed_end: int = -1
) -> tuple[list[Event], int | None]:
    """Validate ``events`` rows (ordered by seq) into events; ``seq`` must run 0, 1, 2…

    Damage after ``committed_end`` (the seq of the last ``turn/end`` row) is a crash tail, as
    upstream's ``scanRows`` treats it: the events before it are returned with the seq where
    the tail begins (``None`` when there is none). Damage at or before it is refused.

    The load hot path. ``cursor`` yields :data:`EVENT_COLUMNS` plus ``json_valid(data)`` (or
    ``0`` where SQLite lacks JSON support). Rows are fetched a chunk at a time, so the row
    texts of the whole log never sit in memory beside the decoded events; each event keeps
    its ``data`` as the row's JSON text until first used (:func:`dsh_core.event_from_raw`),
    and event types are shared.

    Raises:
        LogFormatError: naming ``source`` and ``events[seq=N].<column>``.
    """
    events: list[Event] = []
    append = events.append
    shared: dict[str, str] = {}
    share = shared.setdefault
    expected = 0
    while rows := cursor.fetchmany(CHUNK_ROWS):
        datas = _bulk_data(rows)
        for index, row in enumerate(rows):
            try:
                data = datas[index] if datas is not None else _row_data(row, source)
                seq, kind, time, _, seqs_text, op_text, extra_text, _ = row
                if seq != expected or type(seq) is not int:
                    raise LogFormatError(
                        source,
                        None,
                        f"events[seq={seq}].seq",
                        f"seq gap: expected seq {expected}, found {seq!r}",
                    )
                if type(data) is not dict:
                    raise LogFormatError(
                        source, None, f"events[seq={seq}].data", "data must be a JSON object"
                    )
                if type(kind) is not str or not kind:
                    raise LogFormatError(
                        source,
                        None,
                        f"events[seq={seq}].type",
                        f"the type must be a non-empty string, found {kind!r}",
                    )
                if type(time) is not int:
                    raise LogFormatError(
                        source,
                        None,
                        f"events[seq={seq}].time",
                        f"time must be an integer, found {time!r}",
                    )
                kind = share(kind, kind)
                if seqs_text is None and op_text is None and extra_text is None:
                    # data stays the row's JSON text until first used (it was decoded above
                    # only to be checked): a loaded log costs about its size, not 3-4x it
                    append(event_from_raw(kind, seq, time, row[3].encode()))
                else:
                    slow = _slow_event(
                        kind,
                        seq,
                        time,
                        data,  # pyright: ignore[reportUnknownArgumentType]
                        seqs_text,
                        op_text,
                        extra_text,
                        source,
                    )
                    append(slow)
            except LogFormatError:
                if expected <= committed_end:
                    raise
                return events, expected
            expected += 1
    return events, None


def _slow_event(
    kind: str,
    seq: int,
    time: int,
    data: dict[str, Any],
    seqs_text: Any,
    op_text: Any,
    extra_text: Any,
    source: str,
) -> Event:
    seqs: list[int] | None = None
    if seqs_text is not None:
        decoded = _decode_column(seqs_text, source, seq, "source_event_seqs")
        items: list[Any] = decoded if isinstance(decoded, list) else []  # pyright: ignore
        if not isinstance(decoded, list) or not all(_is_int(s) for s in items):
            raise LogFormatError(
                source,
                None,
                f"events[seq={seq}].source_event_seqs",
                "source_event_seqs must be a JSON list of integers",
            )
        seqs = items
    surface_op = None if op_text is None else _decode_column(op_text, source, seq, "surface_op")
    extra: dict[str, Any] | None = None
    if extra_text is not None:
        decoded = _decode_column(extra_text, source, seq, "extra")
        if not isinstance(decoded, dict):
            raise LogFormatError(
                source, None, f"events[seq={seq}].extra", "extra must be a JSON object"
            )
        extra = decoded  # pyright: ignore[reportUnknownVariableType]
    return Event(kind, seq, time, data, surface_op, seqs, extra)


_TEXT_COLUMNS = {
    "sessions": ("id", "cwd", "parent_session", "origin", "extra"),
    "events": ("session_id", "type", "data", "source_event_seqs", "surface_op", "extra"),
}


def locate_undecodable(connection: sqlite3.Connection, column: str, session_id: str | None) -> str:
    """The field name (``events[seq=7].data``) of the first row whose ``column`` is not UTF-8.

    The sqlite3 module names only the column when text does not decode; the rows are read
    again as bytes to find which one. ``session_id`` narrows the search to one session.

    Returns:
        The field as the other row errors name it, or just ``column`` when no row is found.
    """
    saved = connection.text_factory
    connection.text_factory = bytes
    try:
        for table, columns in _TEXT_COLUMNS.items():
            if column not in columns:
                continue
            key = "id" if table == "sessions" else "seq"
            owner = "id" if table == "sessions" else "session_id"
            query = f"SELECT {key}, {column} FROM {table}"
            rows = (
                connection.execute(f"{query} WHERE {owner} = ?", (session_id,))
                if session_id is not None
                else connection.execute(query)
            )
            for key_value, value in rows:
                if isinstance(value, bytes) and not _is_utf8(value):
                    shown = (
                        key_value.decode("utf-8", "backslashreplace")
                        if isinstance(key_value, bytes)
                        else key_value
                    )
                    return f"{table}[{key}={shown!r}].{column}"
    finally:
        connection.text_factory = saved
    return column


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True

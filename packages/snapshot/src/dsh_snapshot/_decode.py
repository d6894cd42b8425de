"""Decoded views of a file for the key scan: what a key looks like after each encoding is undone.

A key hides from a plain regex behind an encoding: a JSON escape (``sk\\u002d…``), an escaped
JSON string inside a JSON string, base64, hex, percent-encoding, UTF-16/UTF-32 text, or a split
across two streamed chunks. Each function here undoes one class and yields the text a detector
should see, with the line it came from.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from dsh_core import loads_bounded

__all__ = ["file_texts", "line_at", "line_views", "split_views"]

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: its BOM starts the same way
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_SAMPLE = 4096
_NUL_SHARE = 0.9
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|[nrtbf\"'/\\])")
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
# 20 base64 characters carry 15 bytes: shorter than any key worth finding.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{20,}={0,2}")
# 32 hex digits carry 16 bytes: a hex dump of a key (``xxd -p``, ``.hex()``).
_HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){16,}")
_MAX_DEPTH = 3  # base64 inside base64 inside base64
_MAX_UNESCAPE = 8  # JSON escaped inside JSON, eight levels deep
_PRINTABLE_SHARE = 0.85
# Keys whose string values are streamed pieces of one text: the deltas of a block, the chunks
# of a message, the packed rows' members.
_DELTA_KEYS = frozenset({"text", "argumentsDelta", "texts", "args", "reasoning_content"})
# Scalars that tell one stream apart from another: a block's turn, step and index; a stdout
# frame's session and update kind.
_STREAM_KEYS = frozenset({"turn", "step", "index", "sessionId", "sessionUpdate", "type"})


def _nul_encoding(sample: bytes) -> str | None:
    """UTF-16/UTF-32 without a BOM, recognised by where the NUL bytes of ASCII text fall."""
    size = len(sample) - len(sample) % 4
    if size < 4 or sample.count(0) < size // 4:
        return None

    def share(offsets: tuple[int, ...]) -> float:
        hits = sum(1 for i in range(0, size, 4) for o in offsets if sample[i + o] == 0)
        return hits / (len(offsets) * size // 4)

    for offsets, name in (
        ((1, 2, 3), "utf-32-le"),
        ((0, 1, 2), "utf-32-be"),
        ((1, 3), "utf-16-le"),
        ((0, 2), "utf-16-be"),
    ):
        if share(offsets) >= _NUL_SHARE:
            return name
    return None


def file_texts(data: bytes) -> list[str]:
    """The ways to read a file's bytes as text, most likely first, without duplicates.

    UTF-8 (undecodable bytes replaced, so ASCII keys survive in any binary), the encoding a
    BOM or the NUL pattern announces (UTF-16/UTF-32), and the bytes with every NUL removed
    (UTF-16 text embedded in a binary file, such as a SQLite page).
    """
    texts = [data.decode("utf-8", "replace")]
    for bom, name in _BOMS:
        if data.startswith(bom):
            texts.insert(0, data[len(bom) :].decode(name, "replace"))
            break
    else:
        name = _nul_encoding(data[:_SAMPLE])
        if name is not None:
            texts.insert(0, data.decode(name, "replace"))
    if b"\x00" in data:
        texts.append(data.replace(b"\x00", b"").decode("utf-8", "replace"))
    return list(dict.fromkeys(texts))


def _unescape_once(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        body = match.group(1)
        if body[0] in "uUx":
            return chr(int(body[1:], 16)) if int(body[1:], 16) < 0x110000 else match.group(0)
        return _SIMPLE_ESCAPES.get(body, body)

    return _ESCAPE.sub(one, text)


# Runs already decoded at a depth, per top-level text: the same run at the same depth gives
# the same views, and a run usually stands unchanged in several unescaped views of a text.
_Done = set[tuple[int, str, str]]


def _first(done: _Done, depth: int, kind: str, run: str) -> bool:
    key = (depth, kind, run)
    if key in done:
        return False
    done.add(key)
    return True


def _base64_texts(text: str, depth: int, done: _Done) -> Iterator[str]:
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0).rstrip("=")
        if not _first(done, depth, "base64", run):
            continue
        for altchars in (None, b"-_"):
            try:
                raw = base64.b64decode(run + "=" * (-len(run) % 4), altchars=altchars)
            except (binascii.Error, ValueError):
                continue
            decoded = raw.decode("utf-8", "replace")
            printable = sum(1 for c in decoded if c.isprintable() or c in "\n\r\t")
            if decoded and printable / len(decoded) >= _PRINTABLE_SHARE:
                yield from _views(decoded, depth + 1, done)
                break
            if b"\x00" in raw:  # base64 of UTF-16 text
                for inner in file_texts(raw)[:1]:
                    yield from _views(inner, depth + 1, done)


def _hex_texts(text: str, depth: int, done: _Done) -> Iterator[str]:
    for match in _HEX_RUN.finditer(text):
        run = match.group(0)
        if not _first(done, depth, "hex", run):
            continue
        decoded = bytes.fromhex(run[: len(run) // 2 * 2]).decode("utf-8", "replace")
        printable = sum(1 for c in decoded if c.isprintable() or c in "\n\r\t")
        if decoded and printable / len(decoded) >= _PRINTABLE_SHARE:
            yield from _views(decoded, depth + 1, done)


def _views(text: str, depth: int, done: _Done) -> Iterator[str]:
    current = text
    seen: list[str] = []
    for _ in range(_MAX_UNESCAPE + 1):  # nested escaped JSON: one more level each round
        if current in seen:
            break
        seen.append(current)
        current = _unescape_once(current)
    for view in list(seen):
        if _PERCENT.search(view):
            seen.append(unquote(view))
    yield from seen
    if depth < _MAX_DEPTH:
        for view in list(seen):
            yield from _base64_texts(view, depth, done)
            yield from _hex_texts(view, depth, done)


def line_views(line: str) -> list[str]:
    """One line as a detector should see it: as written, with JSON/C escapes undone (repeatedly,
    for JSON escaped inside JSON), percent-decoded, and with every base64 run decoded (and its
    content decoded in turn)."""
    return list(dict.fromkeys(_views(line, 0, set())))


def _documents(text: str) -> Iterator[tuple[int, Any]]:
    """JSON values of a file with their first line: the whole file, else one per line."""
    # Bounded: a deeply nested document is scanned as lines of text, never a crash.
    try:
        yield 1, loads_bounded(text)
        return
    except ValueError:
        pass
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(("{", "[")):
            try:
                yield number, loads_bounded(line)
            except ValueError:
                continue


def _pieces(
    value: Any, path: tuple[str, ...], context: tuple[tuple[str, Any], ...]
) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(value, dict):
        obj: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
        inner = context + tuple(
            (k, v) for k, v in obj.items() if k in _STREAM_KEYS and isinstance(v, str | int)
        )
        for key, item in obj.items():
            if key in _DELTA_KEYS and isinstance(item, str):
                yield ((*path, key), inner), item
            elif key in _DELTA_KEYS and isinstance(item, list):
                members: list[Any] = item  # pyright: ignore[reportUnknownVariableType]
                for member in members:
                    if isinstance(member, str):
                        yield ((*path, key), inner), member
            elif isinstance(item, dict | list):  # a scalar holds no piece: no call for it
                yield from _pieces(item, (*path, key), inner)
    elif isinstance(value, list):
        items: list[Any] = value  # pyright: ignore[reportUnknownVariableType]
        for item in items:
            if isinstance(item, dict | list):
                yield from _pieces(item, path, context)


def split_views(text: str) -> list[tuple[list[tuple[int, int]], str]]:
    """Streamed pieces of one text joined back together, with where each piece starts.

    In a session log the deltas of one block (same turn, step, index), in a stdout fixture the
    chunks of one session's message, in a script the chunks of one response index: a key
    split across two of them is whole again here. Streams are keyed by their path with list
    positions left out and by the stream scalars (turn, step, index, session, type) of the
    objects that enclose them.

    Returns:
        ``(starts, joined)`` per stream of two or more pieces; ``starts`` holds
        ``(offset in joined, line)`` for each piece, in order.
    """
    starts: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
    parts: dict[tuple[Any, ...], list[str]] = {}
    length: dict[tuple[Any, ...], int] = {}
    for number, document in _documents(text):
        for key, piece in _pieces(document, (), ()):
            starts.setdefault(key, []).append((length.get(key, 0), number))
            parts.setdefault(key, []).append(piece)
            length[key] = length.get(key, 0) + len(piece)
    return [(starts[key], "".join(found)) for key, found in parts.items() if len(found) > 1]


def line_at(starts: list[tuple[int, int]], offset: int) -> int:
    """The line of the piece that holds ``offset`` of a joined stream."""
    line = starts[0][1]
    for start, number in starts:
        if start > offset:
            break
        line = number
    return line

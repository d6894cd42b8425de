"""The key scan's content-hash cache: one scan per file content, across backends and runs.

A scenario is scanned before each of its runs (one per store backend, again on every gate
invocation); its files rarely change. Findings depend only on the bytes, the secret values
looked for and the scanner itself, so they are kept under the SHA-256 of all three: in memory
for the process, and, when ``DSH_SCAN_CACHE_DIR`` names a directory, one small JSON file per
content there, across invocations. The secret values enter the key only through their hash.

The directory is trusted like the installed code (a planted entry could clear a file): keep
it outside any checkout, writable only by the user (it is created 0700; entries are written
atomically with ``O_NOFOLLOW``). An unreadable or malformed entry is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["CACHE_DIR_ENV", "Raw", "cache_key", "clear", "lookup", "store"]

CACHE_DIR_ENV = "DSH_SCAN_CACHE_DIR"
# Bumped whenever the detectors or decoders change what they find.
# 3: placeholders and variable names are not findings; 4: hex runs decoded.
_VERSION = b"dsh-keyscan 4\0"
_MAX_ENTRY = 1 << 20

Raw = tuple[int, str, str, int]  # (line, kind, sha256 of the value, length)

_memory: dict[str, list[Raw]] = {}


def cache_key(data: bytes, secrets: Iterable[str]) -> str:
    """The entry name for ``data`` scanned for ``secrets`` (hashed, never stored)."""
    h = hashlib.sha256(_VERSION)
    for value in sorted(secrets):
        h.update(hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest())
    h.update(b"\0")
    h.update(data)
    return h.hexdigest()


def _directory() -> Path | None:
    value = os.environ.get(CACHE_DIR_ENV, "")
    return Path(value) if value else None


def _parse(raw: object) -> list[Raw] | None:
    if not isinstance(raw, list):
        return None
    out: list[Raw] = []
    for item in raw:  # pyright: ignore[reportUnknownVariableType]
        if not (isinstance(item, list) and len(item) == 4):  # pyright: ignore[reportUnknownArgumentType]
            return None
        line, kind, digest, length = item  # pyright: ignore[reportUnknownVariableType]
        if not (
            isinstance(line, int)
            and isinstance(kind, str)
            and isinstance(digest, str)
            and isinstance(length, int)
        ):
            return None
        out.append((line, kind, digest, length))
    return out


def lookup(key: str) -> list[Raw] | None:
    """The findings stored under ``key``, or None when it was never scanned."""
    if key in _memory:
        return _memory[key]
    directory = _directory()
    if directory is None:
        return None
    try:
        fd = os.open(directory / f"{key}.json", os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            found = _parse(json.loads(handle.read(_MAX_ENTRY)))
    except (OSError, ValueError, RecursionError):
        return None
    if found is not None:
        _memory[key] = found
    return found


def store(key: str, findings: list[Raw]) -> None:
    """Remember ``findings`` under ``key`` (and write them to the cache dir when set)."""
    _memory[key] = findings
    directory = _directory()
    if directory is None:
        return
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = directory / f".{key}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump([list(f) for f in findings], handle)
        os.replace(tmp, directory / f"{key}.json")
    except OSError:
        return  # a cache that cannot be written only costs a rescan


def clear() -> None:
    """Forget what this process scanned (the on-disk entries stay)."""
    _memory.clear()

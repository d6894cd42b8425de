"""Normalisation: what makes two runs of one scenario comparable (DESIGN §8).

Both sides go through the same functions: ``createdAt``/``time`` → 0, the run's cwd →
``{{cwd}}``, session ids and any UUID → ``{{sessionId}}``, JSON-RPC ids renumbered by first
appearance. Logs are read with the strict core reader first, so a fixture that omits
``seq``/``time`` or stores packed rows compares by its logical events.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from dsh_core import SessionLog, dumps_event, dumps_header, read_log

__all__ = [
    "CWD",
    "SESSION_ID",
    "Normalizer",
    "dumps_line",
    "normalize_frames",
    "normalize_log",
    "normalize_log_text",
    "parse_jsonl",
]

CWD = "{{cwd}}"
SESSION_ID = "{{sessionId}}"
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class Normalizer:
    """Replaces run-specific strings (cwds, session ids, UUIDs) inside JSON values.

    Args:
        cwds: paths to replace with ``{{cwd}}`` (longest first, so nested paths win).
        session_ids: ids to replace with ``{{sessionId}}`` even when they are not UUIDs.
    """

    def __init__(self, cwds: Iterable[str] = (), session_ids: Iterable[str] = ()) -> None:
        self._cwds = sorted({c for c in cwds if c}, key=len, reverse=True)
        self._ids = sorted({s for s in session_ids if s}, key=len, reverse=True)

    def text(self, value: str) -> str:
        """One string, normalised."""
        for cwd in self._cwds:
            value = value.replace(cwd, CWD)
        for sid in self._ids:
            value = value.replace(sid, SESSION_ID)
        return _UUID.sub(SESSION_ID, value)

    def value(self, value: Any) -> Any:
        """A JSON value, normalised recursively (keys are kept as they are)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}  # pyright: ignore
        return value


def dumps_line(value: Any) -> str:
    """The canonical one-line JSON used for fixtures (compact, UTF-8, key order kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def parse_jsonl(text: str, source: str) -> list[Any]:
    """Parse JSON Lines, skipping blank lines.

    Raises:
        ValueError: naming the source and line of invalid JSON.
    """
    out: list[Any] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source}:{number}: invalid JSON ({exc.msg})") from None
    return out


def log_cwds_and_ids(texts: Iterable[tuple[str, str]]) -> tuple[set[str], set[str]]:
    """The cwds and session ids named by the headers of several logs (``(source, text)`` pairs)."""
    return logs_cwds_and_ids(read_log(text.splitlines(), source) for source, text in texts)


def logs_cwds_and_ids(logs: Iterable[SessionLog]) -> tuple[set[str], set[str]]:
    """The cwds and session ids named by the headers of several parsed logs."""
    cwds: set[str] = set()
    ids: set[str] = set()
    for log in logs:
        ids.add(log.header.id)
        if log.header.parent_session:
            ids.add(log.header.parent_session)
        if log.header.cwd:
            cwds.add(log.header.cwd)
    return cwds, ids


def normalize_log_text(text: str, source: str, normalizer: Normalizer) -> list[Any]:
    """A log as a list of normalised JSON objects: the header first, then each logical event.

    Raises:
        dsh_core.LogFormatError: the text is not a valid log.
    """
    return normalize_log(read_log(text.splitlines(), source), normalizer)


def normalize_log(log: SessionLog, normalizer: Normalizer) -> list[Any]:
    """A parsed log as normalised JSON objects (see :func:`normalize_log_text`), in one pass."""
    header: dict[str, Any] = json.loads(dumps_header(log.header))
    header["createdAt"] = 0
    out: list[Any] = [normalizer.value(header)]
    for event in log.events:
        row: dict[str, Any] = json.loads(dumps_event(event))
        row["time"] = 0
        out.append(normalizer.value(row))
    return out


def normalize_frames(frames: Iterable[Any], normalizer: Normalizer) -> list[Any]:
    """JSON-RPC frames normalised, with request ids renumbered 1, 2, … by first appearance."""
    ids: dict[str, int] = {}
    out: list[Any] = []
    for frame in frames:
        value = normalizer.value(frame)
        if isinstance(value, dict) and "id" in value and value["id"] is not None:
            key = json.dumps(value["id"])
            value["id"] = ids.setdefault(key, len(ids) + 1)
        out.append(value)
    return out

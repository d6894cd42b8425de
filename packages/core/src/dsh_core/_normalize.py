"""Normalisation: what makes two runs of one scenario comparable (DESIGN §8).

The one normaliser of the project: the snapshot gate, its fixture writer and the tests that
compare our logs with upstream's all use it. Both sides of a comparison go through the same
functions: ``createdAt``/``time`` → 0, the run's cwd → ``{{cwd}}``, JSON-RPC ids renumbered by
first appearance, and session ids replaced by one of two schemes:

- **tree** (our own fixtures): each session gets a stable per-scenario name,
  ``{{session:0}}`` for the primary, then ``{{session:1}}``… for the others in creation order
  (:func:`creation_order`), so ``parentSession`` still says which session a child came from
  and a child linked to the wrong parent differs;
- **flat** (upstream's scheme, kept for upstream recordings): every session id and any UUID
  becomes ``{{sessionId}}``.

A value that is already a placeholder (``{{…}}``) is left as it is, so a committed fixture
compares verbatim and a hand-edited link is never renamed into agreement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from dsh_core._logformat import SessionLog, dumps_event, dumps_header, read_log
from dsh_core._messages import delegated_prompts, first_user_text

__all__ = [
    "CWD",
    "SESSION_ID",
    "Normalizer",
    "creation_order",
    "dumps_line",
    "log_normalizer",
    "normalize_frames",
    "normalize_log",
    "normalize_log_text",
    "parse_jsonl",
    "session_placeholder",
]

CWD = "{{cwd}}"
SESSION_ID = "{{sessionId}}"
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_PLACEHOLDER = re.compile(r"\{\{[^{}]*\}\}")
_NOT_SPAWNED = 1 << 62


def session_placeholder(index: int) -> str:
    """The tree scheme's name of the ``index``-th session in creation order (0: the primary)."""
    return f"{{{{session:{index}}}}}"


class TextPattern(Protocol):
    """A compiled regular expression as :class:`Normalizer` uses it: ``re.Pattern`` fits, and
    so does a linear-time engine's (``google-re2``), which patterns from a scenario use."""

    def sub(self, repl: Callable[[Any], str], string: str) -> str:
        """``string`` with every match replaced by what ``repl`` returns for it."""
        ...


class Normalizer:
    """Replaces run-specific strings (cwds, session ids, UUIDs) inside JSON values.

    Args:
        cwds: paths to replace with ``{{cwd}}`` (longest first, so nested paths win).
        session_ids: ids to replace with ``{{sessionId}}`` even when they are not UUIDs.
        names: ids to replace with their own placeholder (the tree scheme); they win over
            ``session_ids`` and over the UUID sweep.
        literals: other run-specific strings and their placeholders (a run's private home
            and temp dir: ``{{home}}``, ``{{tmp}}``); replaced with the cwds, longest first.
        patterns: user scrubbers, ``(regex, placeholder)``, applied last, in order, to the
            text the other replacements left (a date, a port, a version).
    """

    def __init__(
        self,
        cwds: Iterable[str] = (),
        session_ids: Iterable[str] = (),
        names: Mapping[str, str] | None = None,
        *,
        literals: Mapping[str, str] | None = None,
        patterns: Sequence[tuple[TextPattern, str]] = (),
    ) -> None:
        pairs = {c: CWD for c in cwds if c} | {k: v for k, v in (literals or {}).items() if k}
        self._literals = sorted(pairs.items(), key=lambda kv: len(kv[0]), reverse=True)
        self._patterns = tuple(patterns)
        self._names = sorted((names or {}).items(), key=lambda kv: len(kv[0]), reverse=True)
        named = {k for k, _ in self._names}
        self._ids = sorted({s for s in session_ids if s and s not in named}, key=len, reverse=True)

    def text(self, value: str) -> str:
        """One string, normalised."""
        for literal, placeholder in self._literals:
            value = value.replace(literal, placeholder)
        for sid, name in self._names:
            value = value.replace(sid, name)
        for sid in self._ids:
            value = value.replace(sid, SESSION_ID)
        value = _UUID.sub(SESSION_ID, value)
        for pattern, placeholder in self._patterns:
            value = pattern.sub(_literal(placeholder), value)
        return value

    def value(self, value: Any) -> Any:
        """A JSON value, normalised recursively (keys are kept as they are)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}  # pyright: ignore
        return value


def _is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.fullmatch(value))


def _spawn_positions(logs: Sequence[SessionLog]) -> dict[int, int]:
    """For each child (by index in ``logs``), the position in its parent's log of the tool
    call that spawned it: the first not yet taken call whose prompt the child's own part
    begins with. Siblings that share a prompt take those calls in ``createdAt`` order."""
    by_id = {log.header.id: log for log in logs}
    taken: dict[str, set[int]] = {}
    out: dict[int, int] = {}
    children = sorted(
        (i for i, log in enumerate(logs) if log.header.parent_session in by_id),
        key=lambda i: logs[i].header.created_at,
    )
    for index in children:
        parent_id = logs[index].header.parent_session or ""
        child = logs[index]
        prompt = first_user_text(child.events[child.header.effective_seed_length :])
        used = taken.setdefault(parent_id, set())
        for position, _, asked in delegated_prompts(by_id[parent_id].events):
            if asked == prompt and position not in used:
                used.add(position)
                out[index] = position
                break
    return out


def creation_order(logs: Sequence[SessionLog]) -> list[SessionLog]:
    """``logs`` in creation order: sessions without a parent first, then by ``createdAt``;
    siblings created in the same millisecond by the position of the tool call that spawned
    them, then by their first event's time and id (so the order never depends on a random id
    unless nothing else tells the sessions apart)."""
    spawned = _spawn_positions(logs)

    def key(item: tuple[int, SessionLog]) -> tuple[int, int, int, int, str]:
        index, log = item
        first_time = log.events[0].time if log.events else 0
        child = 1 if log.header.parent_session else 0
        position = spawned.get(index, _NOT_SPAWNED)
        return (child, log.header.created_at, position, first_time, log.header.id)

    return [log for _, log in sorted(enumerate(logs), key=key)]


def log_normalizer(
    logs: Sequence[SessionLog],
    *,
    tree: bool,
    cwds: Iterable[str] = (),
    session_ids: Iterable[str] = (),
    literals: Mapping[str, str] | None = None,
    patterns: Sequence[tuple[TextPattern, str]] = (),
) -> Normalizer:
    """The normaliser for a set of logs (already in :func:`creation_order`) and what else a run
    names: the cwds and ids of their headers, plus ``cwds`` and ``session_ids``; ``literals``
    and ``patterns`` as :class:`Normalizer` takes them.

    With ``tree``, the ``i``-th log's id becomes ``{{session:i}}``; ids that are already
    placeholders (a committed fixture) stay as they are. Without it, upstream's flat scheme.
    """
    all_cwds = {*cwds}
    ids = {*session_ids}
    names: dict[str, str] = {}
    for index, log in enumerate(logs):
        header = log.header
        if header.cwd and not _is_placeholder(header.cwd):
            all_cwds.add(header.cwd)
        for sid in (header.id, header.parent_session):
            if sid and not _is_placeholder(sid):
                ids.add(sid)
        if tree and not _is_placeholder(header.id):
            names.setdefault(header.id, session_placeholder(index))
    return Normalizer(all_cwds, ids, names, literals=literals, patterns=patterns)


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


def normalize_log(log: SessionLog, normalizer: Normalizer) -> list[Any]:
    """A parsed log as normalised JSON objects: the header first, then each logical event."""
    header: dict[str, Any] = json.loads(dumps_header(log.header))
    header["createdAt"] = 0
    out: list[Any] = [normalizer.value(header)]
    for event in log.events:
        row: dict[str, Any] = json.loads(dumps_event(event))
        row["time"] = 0
        out.append(normalizer.value(row))
    return out


def normalize_log_text(text: str, source: str, normalizer: Normalizer) -> list[Any]:
    """A log's text as normalised JSON objects (see :func:`normalize_log`).

    Raises:
        LogFormatError: the text is not a valid log.
    """
    return normalize_log(read_log(text.splitlines(), source), normalizer)


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


def _literal(placeholder: str) -> Callable[[Any], str]:
    """A replacement that inserts ``placeholder`` as it is (``re.sub`` would read its
    backslashes as escapes)."""
    return lambda _: placeholder

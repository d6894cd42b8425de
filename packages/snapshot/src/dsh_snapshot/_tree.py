"""The session tree of a recording: which session delegated to which, and what each one did.

The model only; :mod:`dsh_snapshot._treeload` reads recordings into it, :mod:`dsh_snapshot._show`
and :mod:`dsh_snapshot._html` draw it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from dsh_core import DshError, SessionHeader

__all__ = [
    "ModelCall",
    "Origin",
    "RecordingKind",
    "SessionNode",
    "SessionTree",
    "ToolCallView",
    "TreeError",
    "TurnView",
    "sum_usage",
]

RecordingKind = Literal["scenario", "upstream", "proxy"]


class TreeError(DshError):
    """A path is neither a scenario folder nor a recording root, or holds no readable logs."""


@dataclass(slots=True)
class ModelCall:
    """One ``stream()`` call as the log records it: its chunks up to and including ``finish``.

    Attributes:
        turn: the turn of its chunks.
        step: the step of its chunks.
        chunks: how many ``assistant/chunk`` events it streamed.
        usage: the ``usage`` chunk's token counts (``{}`` when there was none).
        finish: the ``finish`` reason's kind, or ``"unfinished"`` when the stream stopped first.
        inherited: part of a fork child's seed (the parent made this call).
    """

    turn: int
    step: int
    chunks: int = 0
    usage: dict[str, int] = field(default_factory=dict[str, int])
    finish: str = "unfinished"
    inherited: bool = False


@dataclass(slots=True)
class ToolCallView:
    """A ``tool/call`` and what became of it.

    Attributes:
        call_id: the model's call id.
        name: the tool's name.
        description: the ``description`` argument, when the arguments carry one.
        prompt: the ``prompt`` argument (a delegation), when the arguments carry one.
        is_error: the matching ``tool/result`` was an error (``None``: no result logged).
        child: the label of the child session this call started, if any.
    """

    call_id: str
    name: str
    step: int
    description: str = ""
    prompt: str = ""
    is_error: bool | None = None
    child: str = ""


@dataclass(slots=True)
class TurnView:
    """One turn: the user's prompt, the model calls, the tool calls and the final message."""

    number: int
    inherited: bool = False
    prompt: str = ""
    final_message: str = ""
    end: str = "open"
    calls: list[ModelCall] = field(default_factory=list[ModelCall])
    tool_calls: list[ToolCallView] = field(default_factory=list[ToolCallView])


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a child came from in its parent: the turn and the tool call (when found)."""

    turn: int
    call_id: str = ""
    tool: str = ""
    description: str = ""


@dataclass(slots=True)
class SessionNode:
    """One session log and its place in the tree.

    Attributes:
        label: where it came from: a scenario's fixture (``session.1.jsonl``), or the name
            ``dsh_llm_proxy.recorded_logs`` gives a proxy root's session.
        header: the log's header.
        kind: ``primary`` (no parent), ``spawn`` (a fresh child) or ``fork`` (a seeded child).
        seed_length: the header's ``seedLength`` (0 when absent).
        events: how many logical events the log holds (packed rows count as their members).
        model: the model named by the first ``request/header`` event, if any.
        origin: the parent's turn and tool call that started this child.
        turns: every turn, inherited ones first.
        children: the sessions this one started.
    """

    label: str
    header: SessionHeader
    kind: Literal["primary", "spawn", "fork"]
    seed_length: int
    events: int
    model: str = ""
    origin: Origin | None = None
    turns: list[TurnView] = field(default_factory=list[TurnView])
    children: list[SessionNode] = field(default_factory=list["SessionNode"])
    first_prompt: str = ""
    last_message: str = ""

    @property
    def own_calls(self) -> list[ModelCall]:
        """The model calls this session made itself (not inherited)."""
        return [c for t in self.turns for c in t.calls if not c.inherited]

    def own_usage(self) -> dict[str, int]:
        """Token counts summed over :attr:`own_calls`."""
        return sum_usage(self.own_calls)

    def items(self) -> list[TurnView | SessionNode | None]:
        """What to show inside this session, in reading order: each turn followed by the
        children it started, ``None`` for the seed boundary after the inherited turns, and
        children whose turn is unknown at the end."""
        out: list[TurnView | SessionNode | None] = []
        placed: set[int] = set()
        inherited_open = False
        for turn in self.turns:
            if inherited_open and not turn.inherited:
                out.append(None)
            inherited_open = turn.inherited
            out.append(turn)
            if turn.inherited:
                continue
            for child in self.children:
                if child.origin is not None and child.origin.turn == turn.number:
                    placed.add(id(child))
                    out.append(child)
        if inherited_open:
            out.append(None)
        out.extend(c for c in self.children if id(c) not in placed)
        return out


@dataclass(slots=True)
class SessionTree:
    """A recording's sessions as a forest (normally one primary with its children).

    Attributes:
        name: ``profile/name`` of a scenario, or the root folder's name.
        path: the folder read.
        kind: ``scenario`` (ours), ``upstream`` or ``proxy`` (a dsh-llm-proxy root).
        roots: sessions without a parent in this recording.
        notes: what the reader should know (ambiguous ids, a parent not in the folder, …).
    """

    name: str
    path: Path
    kind: RecordingKind
    roots: list[SessionNode] = field(default_factory=list[SessionNode])
    notes: list[str] = field(default_factory=list[str])

    def walk(self) -> Iterator[SessionNode]:
        """Every session, parents before their children."""
        stack = list(reversed(self.roots))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


def sum_usage(calls: Sequence[ModelCall]) -> dict[str, int]:
    """Token counts summed over calls; a key no call reported is left out."""
    total: dict[str, int] = {}
    for call in calls:
        for key, value in call.usage.items():
            total[key] = total.get(key, 0) + value
    return total

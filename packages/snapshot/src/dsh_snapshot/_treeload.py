"""Reading a recording into its :class:`~dsh_snapshot._tree.SessionTree`.

A recording is a scenario folder (ours or upstream's: ``session.jsonl``, ``session.N.jsonl``) or
a recording root written by ``dsh-llm-proxy`` (read through its :func:`recorded_logs`). Every
log is read with dsh-core's reader; nothing here parses JSONL by hand. The tree links each child
to its parent by ``parentSession`` and to the tool call that started it by the call's ``prompt``
argument (the child's first own user message), falling back to the parent's delegating calls in
order; a fork child's first ``seedLength`` events are marked inherited.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

from dsh_core import DshError, Event, LogFormatError, ScenarioFiles, SessionLog
from dsh_llm_proxy import is_recording_root, read_log_capped, recorded_logs
from dsh_snapshot._discover import scenario_root
from dsh_snapshot._scenario import is_upstream_recording, load_scenario
from dsh_snapshot._tree import (
    ModelCall,
    Origin,
    RecordingKind,
    SessionNode,
    SessionTree,
    ToolCallView,
    TreeError,
    TurnView,
)

__all__ = ["find_recordings", "load_tree"]

_DELEGATING_TOOLS = frozenset({"subagent", "subagent_fork"})
_USAGE_KEYS = ("inputTokens", "outputTokens", "cacheReadTokens", "reasoningTokens")


# --- reading the logs ---------------------------------------------------------------------------


def _read_file(path: Path) -> SessionLog:
    try:
        return read_log_capped(path)
    except LogFormatError:
        raise
    except DshError as exc:
        raise TreeError(str(exc)) from None


def _is_proxy_root(folder: Path) -> bool:
    return not (folder / ScenarioFiles.INPUT).exists() and is_recording_root(folder)


def find_recordings(path: Path) -> list[tuple[Path, RecordingKind]]:
    """The recordings a path stands for: a scenario folder (or a file in one), a proxy root,
    or every scenario folder and proxy root below a folder, sorted by path.

    Raises:
        TreeError: the path does not exist, or nothing below it is a recording.
    """
    if not path.exists():
        raise TreeError(f"{path}: no such file or folder")
    if path.is_file() and not (path.parent / ScenarioFiles.INPUT).is_file():
        raise TreeError(
            f"{path}: a file outside any scenario folder (no {ScenarioFiles.INPUT} beside it)"
        )
    folder = scenario_root(path)
    found: list[tuple[Path, RecordingKind]] = []

    def visit(current: Path) -> None:
        if (current / ScenarioFiles.INPUT).is_file():
            found.append((current, "upstream" if is_upstream_recording(current) else "scenario"))
            return  # a scenario's workspace/ may hold anything
        if _is_proxy_root(current):
            found.append((current, "proxy"))
            return
        # As discovery walks: a directory link is never entered (a checkout's link must not
        # make show print another tree's recordings, nor loop), and an unreadable entry is
        # passed over rather than ending the whole listing.
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            try:
                below = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if below and not entry.name.startswith("."):
                visit(Path(entry.path))

    visit(folder)
    if not found:
        raise TreeError(
            f"{folder}: not a scenario folder (no {ScenarioFiles.INPUT}) nor a dsh-llm-proxy "
            f"recording root (no recorded sessions), and none below it"
        )
    return found


def load_tree(folder: Path, kind: RecordingKind | None = None) -> SessionTree:
    """Read a scenario folder or a proxy recording root into its session tree.

    Raises:
        TreeError: the folder is not a recording.
        ScenarioError: a scenario folder is malformed (naming the file and field).
        DshError: a log cannot be read (``LogFormatError`` names the file and line).
    """
    folder = folder.resolve()
    if kind is None:
        kinds = find_recordings(folder)
        if len(kinds) != 1 or kinds[0][0] != folder:
            raise TreeError(f"{folder}: not one recording but {len(kinds)} below it")
        kind = kinds[0][1]
    if kind == "proxy":
        logs = recorded_logs(folder)
        # The proxy creates sessions in order; (createdAt, id) is that order (its README).
        logs.sort(key=lambda pair: (pair[1].header.created_at, pair[1].header.id))
        tree = SessionTree(folder.name, folder, kind)
    else:
        scenario = load_scenario(folder)
        logs = [(p.name, _read_file(p)) for p in scenario.session_files]
        tree = SessionTree(scenario.name, folder, "upstream" if scenario.meta is None else kind)
    if not logs:
        tree.notes.append("no session logs recorded")
    _build(tree, logs)
    return tree


# --- building the tree --------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    """The text blocks of a content list joined, tool-result wrappers included."""
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in cast(list[Any], content):
        if not isinstance(block, dict):
            continue
        item = cast(dict[str, Any], block)
        if item.get("type") == "text" and isinstance(item.get("text"), str):
            parts.append(cast(str, item["text"]))
        elif item.get("type") == "tool-result":
            parts.append(_text_of(item.get("content")))
    return "".join(parts)


def _content(data: dict[str, Any]) -> Any:
    """``data.content``, or ``data.message.content`` in upstream's later shape."""
    return data["content"] if "content" in data else _dig(data, "message", "content")


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return cast(dict[str, Any], raw)
    if isinstance(raw, str):
        try:
            value: Any = json.loads(raw)
        except ValueError:
            return {}
        if isinstance(value, dict):
            return cast(dict[str, Any], value)
    return {}


def _dig(value: Any, *keys: str) -> Any:
    """``value[k1][k2]…``, or ``None`` where a level is missing or not an object."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = cast(dict[str, Any], value).get(key)
    return value


def _usage(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    usage = cast(dict[str, Any], raw)
    return {k: v for k in _USAGE_KEYS if isinstance(v := usage.get(k), int)}


def _user_source(data: dict[str, Any]) -> bool:
    source = data.get("source")
    return not isinstance(source, dict) or cast(dict[str, Any], source).get("kind") == "user"


class _TurnBuilder:
    """Walks one log's events once, collecting turns, calls and tool calls."""

    def __init__(self, seed_length: int) -> None:
        self.seed = seed_length
        self.turns: list[TurnView] = []
        self.model = ""
        self._call: ModelCall | None = None
        self._tools: dict[str, ToolCallView] = {}

    def _turn(self, number: int | None, index: int) -> TurnView:
        if number is not None and (not self.turns or self.turns[-1].number != number):
            self.turns.append(TurnView(number, inherited=index < self.seed))
        elif not self.turns:
            self.turns.append(TurnView(0, inherited=index < self.seed))
        return self.turns[-1]

    def _close_call(self) -> None:
        if self._call is not None:
            self._turn(self._call.turn, 0).calls.append(self._call)
            self._call = None

    def feed(self, index: int, event: Event) -> None:
        data = event.data
        turn_no = data.get("turn")
        number = turn_no if isinstance(turn_no, int) else None
        kind = event.type
        if kind == "turn/start":
            self._close_call()
            self._turn(number, index)
        elif kind == "assistant/chunk":
            step = cast(int, data["step"])
            chunk = cast(dict[str, Any], data["chunk"])
            call = self._call
            if call is None or (call.turn, call.step) != (number, step):
                self._close_call()
                self._turn(number, index)
                call = self._call = ModelCall(cast(int, number), step, inherited=index < self.seed)
            call.chunks += 1
            if chunk["type"] == "usage":
                call.usage = _usage(chunk.get("usage"))
            elif chunk["type"] == "finish":
                reason = chunk.get("reason")
                found = (
                    cast(dict[str, Any], reason).get("kind") if isinstance(reason, dict) else None
                )
                call.finish = found if isinstance(found, str) else "finish"
                self._close_call()
        elif kind == "user/message":
            turn = self._turn(number, index)
            if not turn.prompt and _user_source(data):
                turn.prompt = _text_of(_content(data))
        elif kind == "assistant/message":
            text = _text_of(_content(data))
            if text:
                self._turn(number, index).final_message = text
        elif kind == "tool/call":
            args = _arguments(data.get("arguments"))
            view = ToolCallView(
                str(data.get("callId", "")),
                str(data.get("name", "")),
                data["step"] if isinstance(data.get("step"), int) else 0,
                description=str(args.get("description", "") or ""),
                prompt=str(args.get("prompt", "") or ""),
            )
            self._turn(number, index).tool_calls.append(view)
            self._tools[view.call_id] = view
        elif kind == "tool/result":
            call_id = data.get("callId")
            if call_id is None:  # upstream's later shape: message.source.callId
                message = data.get("message")
                source = (
                    cast(dict[str, Any], message).get("source")
                    if isinstance(message, dict)
                    else None
                )
                call_id = (
                    cast(dict[str, Any], source).get("callId") if isinstance(source, dict) else None
                )
            view = self._tools.get(str(call_id))
            if view is not None:
                error = data.get("isError")
                if error is None:
                    content = _content(data)
                    blocks = cast(list[Any], content) if isinstance(content, list) else []
                    error = any(isinstance(b, dict) and b.get("isError") for b in blocks)  # pyright: ignore
                view.is_error = bool(error)
        elif kind == "turn/end":
            self._close_call()
            end = _dig(data, "reason", "kind")
            self._turn(number, index).end = end if isinstance(end, str) else "ended"
        elif kind == "request/header" and not self.model:
            header = data.get("header")
            config = (
                cast(dict[str, Any], header).get("config") if isinstance(header, dict) else None
            )
            model = cast(dict[str, Any], config).get("model") if isinstance(config, dict) else None
            self.model = model if isinstance(model, str) else ""

    def finish(self) -> list[TurnView]:
        self._close_call()
        return self.turns


def _node(label: str, log: SessionLog) -> SessionNode:
    header = log.header
    seed = header.effective_seed_length
    builder = _TurnBuilder(seed)
    for index, event in enumerate(log.events):
        builder.feed(index, event)
    turns = builder.finish()
    kind: Literal["primary", "spawn", "fork"] = "primary"
    if header.parent_session is not None:
        kind = "fork" if seed > 0 else "spawn"
    own = [t for t in turns if not t.inherited]
    return SessionNode(
        label,
        header,
        kind,
        seed,
        len(log.events),
        model=builder.model,
        turns=turns,
        first_prompt=next((t.prompt for t in own if t.prompt), ""),
        last_message=next((t.final_message for t in reversed(own) if t.final_message), ""),
    )


def _link_origin(parent: SessionNode, child: SessionNode) -> None:
    """Find the parent's tool call that started ``child`` and mark both ends."""
    candidates = [
        (turn, call)
        for turn in parent.turns
        if not turn.inherited
        for call in turn.tool_calls
        if not call.child
    ]
    prompt = child.first_prompt.strip()
    match = next(((t, c) for t, c in candidates if prompt and c.prompt.strip() == prompt), None)
    if match is None:
        match = next(
            ((t, c) for t, c in candidates if c.name in _DELEGATING_TOOLS or c.prompt), None
        )
    if match is not None:
        turn, call = match
        call.child = child.label
        child.origin = Origin(turn.number, call.call_id, call.name, call.description)
    elif child.kind == "fork":
        inherited = [t.number for t in child.turns if t.inherited]
        child.origin = Origin(max(inherited, default=0))


def _build(tree: SessionTree, logs: Sequence[tuple[str, SessionLog]]) -> None:
    nodes = [_node(label, log) for label, log in logs]
    ids = [n.header.id for n in nodes]
    shared = sorted({i for i in ids if ids.count(i) > 1})
    if shared:
        tree.notes.append(
            f"{len(ids) - len(set(ids)) + len(shared)} sessions share the id "
            f"{', '.join(shared)} (normalised fixtures): each child is linked to the first "
            "session before it with its parentSession id"
        )
    for position, node in enumerate(nodes):
        parent_id = node.header.parent_session
        if parent_id is None:
            tree.roots.append(node)
            continue
        parent = next((p for p in nodes[:position] if p.header.id == parent_id), None)
        if parent is None:
            parent = next((p for p in nodes if p.header.id == parent_id and p is not node), None)
        if parent is None:
            tree.notes.append(
                f"{node.label}: its parent {parent_id} is not in this recording; shown as a root"
            )
            tree.roots.append(node)
            continue
        _link_origin(parent, node)
        parent.children.append(node)

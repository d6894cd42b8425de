"""``ScriptLibrary``: one scripted server for a whole folder of scenarios, routed by content.

A record run starts one agent per scenario against one endpoint, and the public API sends no
session header, so the server cannot tell sessions apart by id. The library reads every
scenario folder under a root (``input.json`` plus ``model.script.json``) and answers each chat
request from the script whose conversation it is:

- a child session is recognised by its delegated prompt: the last user message equals the
  ``prompt`` argument of a ``subagent`` / ``subagent_fork`` call in the scenario's scripts (the
  N-th such call belongs to the N-th child script, the order the scripts are written in);
- a primary session by its user messages, which must be the first prompts of ``input.json``.

The response is the script's entry number *k*, where *k* is the number of assistant messages
the request carries after the session's first own user message: every earlier answer of the
session comes back in the request, so routing needs no state. When several scenarios match
(two scenarios may open with the same prompt), they must agree on that entry, else the request
is answered with an error naming them. :meth:`ScriptLibrary.serve_first` queues answers that
take the place of the next routed ones (faults, or a deliberately wrong answer).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from dsh_core import ScenarioFiles
from dsh_scripted_server._script import (
    Response,
    ScriptError,
    ScriptItem,
    load_script_file,
    validate_script,
)

__all__ = ["ScriptLibrary"]

_DELEGATION_TOOLS = ("subagent", "subagent_fork")


@dataclass(frozen=True, slots=True)
class _Entry:
    scenario: str
    session: int
    prompts: tuple[str, ...]  # a primary's input.json prompts (empty for a child)
    delegated: str | None  # a child's delegated prompt (None for a primary)
    responses: tuple[Response, ...]


def _obj(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(cast(dict[str, Any], p).get("text", ""))
            for p in cast(list[Any], content)
            if isinstance(p, dict)
        )
    return ""


def _prompts(path: Path) -> tuple[str, ...]:
    try:
        doc: Any = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ScriptError(str(path), "(document)", f"not valid JSON: {exc}") from None
    steps: Any = _obj(doc).get("steps")
    if not isinstance(steps, list):
        raise ScriptError(str(path), "steps", "expected an array of steps")
    out: list[str] = []
    for step in cast(list[Any], steps):
        if isinstance(step, dict):
            step = cast(dict[str, Any], step)
            # A step's text is its prompt: the snapshot op registry gives a text field to the
            # ops that prompt, and only to them (dsh_snapshot.OpRegistry.register).
            if isinstance(step.get("text"), str):
                out.append(step["text"])
    return tuple(out)


def _delegated_prompts(sessions: Sequence[Sequence[Response]]) -> list[str]:
    """The ``prompt`` argument of every delegating tool call, in script order."""
    out: list[str] = []
    for script in sessions:
        for response in script:
            if not isinstance(response, list):
                continue
            for chunk in cast(list[Any], response):
                block = _obj(_obj(chunk).get("block"))
                if _obj(chunk).get("type") != "block-end" or block.get("type") != "tool-call":
                    continue
                if block.get("name") not in _DELEGATION_TOOLS:
                    continue
                try:
                    prompt = _obj(json.loads(str(block.get("arguments", "")))).get("prompt")
                except ValueError:
                    continue
                if isinstance(prompt, str):
                    out.append(prompt)
    return out


class ScriptLibrary:
    """Every scenario's scripts under a folder, answering chat requests by content.

    Use :meth:`from_folder`, then pass it as ``router=`` to
    :class:`~dsh_scripted_server.ScriptedModelServer` (or ``--library DIR`` on the
    ``dsh-scripted-model-server`` command line).
    """

    def __init__(self, entries: Sequence[_Entry]) -> None:
        self._entries = tuple(entries)
        self._lock = threading.Lock()
        self._first: deque[Response] = deque()

    @classmethod
    def from_folder(cls, root: str | Path) -> ScriptLibrary:
        """Load every scenario folder at or below ``root`` that holds a ``model.script.json``.

        Raises:
            ScriptError: a script or ``input.json`` is invalid (the message names the file).
            OSError: a file cannot be read.
        """
        entries: list[_Entry] = []
        for script in sorted(Path(root).rglob(ScenarioFiles.SCRIPT)):
            folder = script.parent
            if not ScenarioFiles(folder).input.is_file():
                continue
            sessions = load_script_file(script)
            name = folder.name
            entries.append(
                _Entry(name, 0, _prompts(ScenarioFiles(folder).input), None, tuple(sessions[0]))
            )
            delegated = _delegated_prompts(sessions)
            for index, (prompt, child) in enumerate(zip(delegated, sessions[1:], strict=False), 1):
                entries.append(_Entry(name, index, (), prompt, tuple(child)))
        return cls(entries)

    @property
    def scenarios(self) -> list[str]:
        """The scenario folder names loaded, in order."""
        return sorted({e.scenario for e in self._entries})

    def serve_first(self, responses: Sequence[ScriptItem]) -> None:
        """Answer the next ``len(responses)`` chat requests with these, before any routing.

        Raises:
            ScriptError: a chunk list is not valid.
        """
        checked = validate_script(responses, path="serve_first")
        with self._lock:
            self._first.extend(checked)

    def route(self, body: dict[str, Any] | None) -> tuple[Response | None, str | None]:
        """The answer to one chat request body, or ``(None, reason)`` when there is none."""
        with self._lock:
            if self._first:
                return self._first.popleft(), None
        messages: Any = (body or {}).get("messages")
        if not isinstance(messages, list):
            return None, "the request has no messages array"
        rows = [cast(dict[str, Any], m) for m in cast(list[Any], messages) if isinstance(m, dict)]
        users = [
            (i, _text(m.get("content"))) for i, m in enumerate(rows) if m.get("role") == "user"
        ]
        if not users:
            return None, "the request has no user message"
        last_at, last_text = users[-1]
        children = [e for e in self._entries if e.delegated is not None]
        # A child's own conversation starts at its delegated prompt, its last user message (what
        # comes before it in a fork child's request is the parent's seed).
        start, candidates = last_at, [e for e in children if e.delegated == last_text]
        if not candidates:
            start, texts = 0, tuple(t for _, t in users)
            candidates = [
                e for e in self._entries if e.delegated is None and e.prompts[: len(texts)] == texts
            ]
        if not candidates:
            return None, f"no scenario in the library opens with the prompt {users[0][1][:120]!r}"
        index = sum(1 for m in rows[start:] if m.get("role") == "assistant")
        answers = [e.responses[index] for e in candidates if index < len(e.responses)]
        names = ", ".join(sorted({f"{e.scenario}[session {e.session}]" for e in candidates}))
        if not answers:
            return None, f"{names}: script exhausted at call {index + 1}"
        if len(answers) != len(candidates) or any(a != answers[0] for a in answers[1:]):
            return None, f"ambiguous request: {names} answer call {index + 1} differently"
        return answers[0], None

"""Keeping recorded answers for new requests: what says so, and when the answers do not fit.

A request-side change (the prompt, the system prompt, the tools, model settings) can be taken
keylessly: the new requests are written with the answers already recorded, and the model is
not asked again. ``record --keep-answers`` does it for a foreign agent's scenario, ``accept``
after a replay that failed on request drift does it for any scenario. This module holds what
both say, and the check that the recorded answers still fit the new requests of our agent
(a foreign agent's are checked by the replaying proxy as the agent asks).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["NO_FIT", "kept_answers_note", "unfit_answer"]

NO_FIT = "the recorded answers do not fit the new requests"


def kept_answers_note(changes: Sequence[str]) -> str:
    """The plain statement of a keyless accept: which requests changed, and that their
    answers are the recorded ones, not asked again."""
    first = f"; first: {changes[0]}" if changes else ""
    return (
        "the new requests are recorded with the recorded answers: the model was NOT asked "
        f"again ({len(changes)} changed request(s){first})"
    )


def _rows(text: str) -> list[dict[str, Any]]:
    """A fixture's rows (each a JSON object: the replay's own normalised output)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _tool_call(row: dict[str, Any]) -> str | None:
    """The tool a recorded answer's complete tool-call block calls, if the row is one."""
    if row.get("type") != "assistant/chunk":
        return None
    chunk: dict[str, Any] = row.get("data", {}).get("chunk", {})
    block: dict[str, Any] | None = chunk.get("block") if chunk.get("type") == "block-end" else None
    if block is not None and block.get("type") == "tool-call":
        return str(block.get("name"))
    return None


def unfit_answer(files: Mapping[str, str]) -> str | None:
    """Why our agent's recorded answers do not fit its new requests, naming the file and the
    call, or ``None`` when they fit.

    ``files`` are a replay's outputs (``session*.jsonl`` by name): the live requests'
    ``request/header`` events with the recorded answers. An answer that calls a tool the new
    request no longer offers would be kept as a call the agent cannot make; the number of
    calls is checked by the replay itself (a session that asks more or fewer calls than
    recorded is not consumed).
    """
    for name in sorted(n for n in files if n.startswith("session")):
        tools: set[str] | None = None
        call = 0
        for row in _rows(files[name]):
            kind = row.get("type")
            if kind == "step/start":
                call += 1
            elif kind == "request/header":
                header = row.get("data", {}).get("header", {})
                tools = {str(t.get("name")) for t in header.get("tools") or ()}
            elif (tool := _tool_call(row)) is not None and tools is not None and tool not in tools:
                return (
                    f"{name} call {call}: the recorded answer calls the tool {tool!r}, which "
                    "the new request no longer offers"
                )
    return None

"""Comparing our agent with recordings made by another agent (the upstream TypeScript one).

Two tools: :class:`Allowances`, the short list of deliberate differences a comparison may
forgive (each one is explained in COMPATIBILITY.md), and :func:`turn_messages`, which reduces a
stdout transcript to what a user saw per prompt — the agent's message text and how the turn
ended — for recordings whose logs carry features this project does not have.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from dsh_snapshot._agent import as_object

__all__ = ["UPSTREAM_ALLOWANCES", "Allowances", "TurnSeen", "apply_allowances", "turn_messages"]


@dataclass(frozen=True, slots=True)
class Allowances:
    """Differences from a fixture that a comparison forgives, all off by default.

    Attributes:
        initialize_result: the ``initialize`` result may differ in ``agentInfo`` and
            ``agentCapabilities`` (our agent names itself); ``protocolVersion`` and
            ``authMethods`` must still match.
        added_header_fields: header keys our logs may carry where the fixture's header has
            none (``origin``/``delegationDepth`` on children, ``cwd`` on an authored header).
    """

    initialize_result: bool = False
    added_header_fields: frozenset[str] = frozenset()

    @property
    def any(self) -> bool:
        return self.initialize_result or bool(self.added_header_fields)


# What an upstream folder (no snapshot.yml) is compared with by default: the deliberate
# differences COMPATIBILITY.md lists, and nothing else.
UPSTREAM_ALLOWANCES = Allowances(
    initialize_result=True,
    added_header_fields=frozenset({"origin", "delegationDepth", "cwd"}),
)


def _initialize_result(frame: Any) -> dict[str, Any] | None:
    result = as_object((as_object(frame) or {}).get("result"))
    return result if result is not None and "protocolVersion" in result else None


def apply_allowances(
    allowances: Allowances,
    expected_logs: list[list[Any]],
    actual_logs: list[list[Any]],
    expected_frames: list[Any],
    actual_frames: list[Any],
) -> tuple[list[list[Any]], list[Any]]:
    """Copies of the actual logs and frames with the forgiven differences taken out.

    Only what the expected side lacks is removed, and only the fields named: anything else
    still differs and is reported.
    """
    logs = copy.deepcopy(actual_logs)
    frames = copy.deepcopy(actual_frames)
    for expected, actual in zip(expected_logs, logs, strict=False):
        if not (expected and actual):
            continue
        exp_header, act_header = as_object(expected[0]), as_object(actual[0])
        if exp_header is not None and act_header is not None:
            for key in allowances.added_header_fields:
                if key not in exp_header:
                    act_header.pop(key, None)
    wanted = next((r for r in map(_initialize_result, expected_frames) if r is not None), None)
    if allowances.initialize_result and wanted is not None:
        for result in map(_initialize_result, frames):
            if result is not None:
                for key in ("agentInfo", "agentCapabilities"):
                    if key in wanted:
                        result[key] = wanted[key]
                    else:
                        result.pop(key, None)
    return logs, frames


@dataclass(frozen=True, slots=True)
class TurnSeen:
    """What a client saw of one prompt: the agent's message text and the turn's ending."""

    text: str
    ending: str

    def __str__(self) -> str:
        return f"{self.ending} after {self.text!r}"


def turn_messages(frames: list[Any]) -> list[TurnSeen]:
    """Per prompt response: the ``agent_message_chunk`` text streamed since the previous
    response, and ``stopReason`` (or ``error: <message>``)."""
    seen: list[TurnSeen] = []
    text: list[str] = []
    for raw in frames:
        frame = as_object(raw) or {}
        if frame.get("method") == "session/update":
            update = as_object((as_object(frame.get("params")) or {}).get("update")) or {}
            content = as_object(update.get("content")) or {}
            if update.get("sessionUpdate") == "agent_message_chunk" and isinstance(
                content.get("text"), str
            ):
                text.append(content["text"])
            continue
        result = as_object(frame.get("result"))
        error = as_object(frame.get("error"))
        if result is not None and "stopReason" in result:
            seen.append(TurnSeen("".join(text), str(result["stopReason"])))
            text = []
        elif error is not None and "id" in frame:
            seen.append(TurnSeen("".join(text), f"error: {error.get('message')}"))
            text = []
    return seen

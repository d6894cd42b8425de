"""Loop profiles: which era of upstream's agent loop the agent reproduces.

``june`` is the loop the June-2026 fixtures were recorded with: tool calls run one after
the other, a child may not delegate again, and an empty completion ends the turn as it is.
``current`` is upstream's later loop (``packages/core/agent-loop`` and ``packages/subagent``
at head): parallel-safe calls run concurrently in a bounded pool, empty completions are
retried, children may delegate to depth 3, and a ``max-tokens`` child fails its delegation.
In both, a ``max-tokens`` step ends the turn without running its (possibly cut-off) tool
calls, as June's ``loop.ts`` already did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from dsh_core._events import ContentBlock
from dsh_core._model import ModelError

__all__ = [
    "DEFAULT_LOOP_PROFILE",
    "DEFAULT_MAX_PARALLEL_TOOL_CALLS",
    "LOOP_PROFILES",
    "EMPTY_RESPONSE_CODE",
    "LoopBehaviour",
    "LoopProfile",
    "finish_failure",
    "is_empty_completion",
    "loop_behaviour",
]

LoopProfile = Literal["june", "current"]
LOOP_PROFILES: tuple[LoopProfile, ...] = get_args(LoopProfile)
DEFAULT_LOOP_PROFILE: LoopProfile = "current"
"""The profile new sessions and new recordings use."""

DEFAULT_MAX_PARALLEL_TOOL_CALLS = 10
"""Upstream's default bound on in-flight parallel-safe calls per step."""

EMPTY_RESPONSE_CODE = "EMPTY_RESPONSE"
"""The error code of a completion with no content (upstream's ``EMPTY_RESPONSE_CODE``)."""


@dataclass(frozen=True, slots=True)
class LoopBehaviour:
    """What a profile decides, spelled out.

    Attributes:
        concurrent_tools: parallel-safe calls of one step run concurrently.
        empty_response_retries: further ``stream()`` calls in the same step after a
            completion with no content (0: the empty completion stands).
        max_delegation_depth: deepest ``delegationDepth`` a child may have by default.
        strict_child_outcome: a child that ends other than ``completed`` gives an error
            result with upstream's later wording and the child's partial text; its final
            text is its last non-empty assistant message.
        logs_request_header: a session logs ``request/header`` before its first model call
            and whenever the header changes (upstream's later logs; June's have none).
        top_level_depth: a top-level session's header says ``"delegationDepth": 0``. Head's
            session reader requires the key on every header (head's recordings carry it on
            all 79 primaries); June's primaries have none.
        max_tokens_stop_reason: the ACP ``stopReason`` of a prompt whose turn ended
            ``max-tokens``: June's bridge (``codec.ts``) says ``max_tokens``; head's
            (``acp/src/index.ts``) settles it as ordinary quiescence, ``end_turn``.
    """

    concurrent_tools: bool
    empty_response_retries: int
    max_delegation_depth: int
    strict_child_outcome: bool
    logs_request_header: bool
    top_level_depth: bool
    max_tokens_stop_reason: Literal["max_tokens", "end_turn"]


_BEHAVIOURS: dict[LoopProfile, LoopBehaviour] = {
    "june": LoopBehaviour(
        concurrent_tools=False,
        empty_response_retries=0,
        max_delegation_depth=1,
        strict_child_outcome=False,
        logs_request_header=False,
        top_level_depth=False,
        max_tokens_stop_reason="max_tokens",
    ),
    # Upstream at head: tool-calls.ts (pool), agent.ts (request-error retry, max-tokens),
    # llm-deepseek's default retry policy (five retries), tool-subagent (maxDepth 3).
    "current": LoopBehaviour(
        concurrent_tools=True,
        empty_response_retries=5,
        max_delegation_depth=3,
        strict_child_outcome=True,
        logs_request_header=True,
        top_level_depth=True,
        max_tokens_stop_reason="end_turn",
    ),
}


def loop_behaviour(profile: LoopProfile) -> LoopBehaviour:
    """The behaviour a profile stands for.

    Raises:
        ValueError: ``profile`` is not one of :data:`LOOP_PROFILES`.
    """
    behaviour = _BEHAVIOURS.get(profile)
    if behaviour is None:
        raise ValueError(
            f"unknown loop profile {profile!r}; expected one of {', '.join(LOOP_PROFILES)}"
        )
    return behaviour


def is_empty_completion(blocks: Sequence[ContentBlock], reason: Mapping[str, Any]) -> bool:
    """A completion upstream's later client maps to ``EMPTY_RESPONSE``: a clean stop with no
    block at all, or the provider's own ``EMPTY_RESPONSE`` error finish."""
    if reason.get("kind") == "stop":
        return not blocks
    failure = reason.get("failure")
    return (
        reason.get("kind") == "error"
        and isinstance(failure, Mapping)
        and cast(Mapping[str, Any], failure).get("code") == EMPTY_RESPONSE_CODE
    )


def finish_failure(reason: Mapping[str, Any]) -> ModelError | None:
    """The step error a failing ``finish`` reason stands for, as upstream's loop throws it.

    ``{kind: "error"}`` carries its ``message``/``code`` (June's shape) or a ``failure``
    object holding them (the later shape); ``{kind: "aborted"}`` is ``model stream aborted``
    coded ``ABORTED``. Every other kind is no failure (``None``).
    """
    kind = reason.get("kind")
    if kind == "aborted":
        return ModelError("model stream aborted", code="ABORTED")
    if kind != "error":
        return None
    failure = reason.get("failure")
    facts = cast(Mapping[str, Any], failure) if isinstance(failure, Mapping) else reason
    message = facts.get("message")
    code = facts.get("code")
    return ModelError(
        message if isinstance(message, str) and message else "the model stream failed",
        code=code if isinstance(code, str) else None,
    )

"""Record-time expectations: what a good recording of a scenario shows, per prompt.

``snapshot.yml`` may hold ``expect:``, a list with one entry per prompt it constrains::

    expect:
      - prompt: 2                 # the 2nd prompt-like step of input.json (1-based)
        message: "^PARENT_DONE$"  # the turn's final agent text matches (RE2 search)
        tools: [subagent_fork]    # exactly these tools were called in the turn (any order)
        end: completed            # how the turn ended
        children:                 # the subagents the turn started, in order
          - seedLength: true      # a fork child (true) or a fresh child (false)
            message: "MARMALADE"  # what came back to the parent (the tool result)

A live recording that misses them is recorded again; checking is a pure function of the
harvested (normalised) logs, so ``record --scripted`` proves them against the committed scripts.
Children are matched to the primary's delegating tool calls in order (the depth-1 trees
this tier records).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import import_module
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "DELEGATION_TOOLS",
    "ChildExpectation",
    "PromptExpectation",
    "TurnFacts",
    "check_expectations",
    "json_object",
    "linear_regex",
    "seed_length",
    "turn_facts",
]

DELEGATION_TOOLS = frozenset({"subagent", "subagent_fork"})
TurnEnd = Literal["completed", "aborted", "error", "max-tokens", "interrupted"]


@cache
def linear_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (``google-re2``): matching is linear in the text whatever
    the pattern, so a crafted ``(a+)+$`` from a pull request cannot stall a recording.

    Raises:
        ValueError: RE2 refuses it (a syntax error, or what only a backtracking engine does:
            back-references, look-arounds, possessive repeats).
    """
    re2: Any = import_module("re2")  # google-re2 ships no type information
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise ValueError(
            f"not a regular expression the linear-time engine (RE2) accepts: {exc} "
            "(no back-references or look-arounds)"
        ) from None


def _compiles(pattern: str | None) -> str | None:
    if pattern is not None:
        linear_regex(pattern)
    return pattern


def _found(pattern: str, text: str) -> bool:
    return linear_regex(pattern).search(text) is not None


class ChildExpectation(BaseModel):
    """One subagent a prompt's turn must start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seedLength: bool
    message: str | None = None

    _check_message = field_validator("message")(_compiles)


class PromptExpectation(BaseModel):
    """What one prompt's turn must show."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: int = Field(ge=1)
    message: str | None = None
    tools: list[str] | None = None
    end: TurnEnd | None = None
    children: list[ChildExpectation] | None = None

    _check_message = field_validator("message")(_compiles)

    def describe(self) -> str:
        """The expectation as one readable clause."""
        parts: list[str] = []
        if self.message is not None:
            parts.append(f"final message matching /{self.message}/")
        if self.tools is not None:
            parts.append(f"tools {sorted(self.tools)}")
        if self.end is not None:
            parts.append(f"turn end {self.end!r}")
        for child in self.children or []:
            kind = "fork child (seedLength)" if child.seedLength else "fresh child (no seedLength)"
            back = f" returning /{child.message}/" if child.message is not None else ""
            parts.append(kind + back)
        return ", ".join(parts) or "nothing"


@dataclass(slots=True)
class ChildFacts:
    """A subagent as the recording shows it."""

    tool: str
    seed_length: int
    returned: str


@dataclass(slots=True)
class TurnFacts:
    """What one turn of the primary log shows."""

    message: str = ""
    tools: list[str] = field(default_factory=list[str])
    end: str | None = None
    children: list[ChildFacts] = field(default_factory=list[ChildFacts])

    def describe(self) -> str:
        """The facts as one readable clause."""
        kids = ", ".join(
            f"{c.tool} child seedLength={c.seed_length} returning {c.returned[:80]!r}"
            for c in self.children
        )
        return (
            f"final message {self.message[:160]!r}, tools {sorted(self.tools)}, "
            f"turn end {self.end!r}" + (f", {kids}" if kids else ", no children")
        )


def json_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _texts(content: Any) -> str:
    blocks: list[Any] = content if isinstance(content, list) else []  # pyright: ignore
    return "".join(
        str(json_object(b).get("text", "")) for b in blocks if json_object(b).get("type") == "text"
    )


def seed_length(log: Sequence[Any]) -> int:
    """The ``seedLength`` of a log's header row (0 when absent)."""
    value = json_object(log[0] if log else None).get("seedLength")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def turn_facts(logs: Sequence[Sequence[Any]]) -> list[TurnFacts]:
    """The primary's turns in order, with the children each one started.

    Args:
        logs: harvested logs (each a header row then event rows), the primary first and its
            children after it in creation order.
    """
    if not logs:
        return []
    children = list(logs[1:])
    turns: list[TurnFacts] = []
    by_call: dict[str, ChildFacts] = {}
    for row in logs[0][1:]:
        kind, data = json_object(row).get("type"), json_object(json_object(row).get("data"))
        if kind == "turn/start":
            turns.append(TurnFacts())
        elif not turns:
            continue
        elif kind == "assistant/message":
            text = _texts(data.get("content"))
            if text:
                turns[-1].message = text
        elif kind == "tool/call":
            name = str(data.get("name", ""))
            turns[-1].tools.append(name)
            if name in DELEGATION_TOOLS and children:
                facts = ChildFacts(name, seed_length(children.pop(0)), "")
                turns[-1].children.append(facts)
                by_call[str(data.get("callId", ""))] = facts
        elif kind == "tool/result":
            facts = by_call.get(str(data.get("callId", "")))
            if facts is not None:
                facts.returned = _texts(data.get("content"))
        elif kind == "turn/end":
            reason = data.get("reason")
            turns[-1].end = str(json_object(reason).get("kind")) if reason is not None else None
    return turns


def _misses(exp: PromptExpectation, facts: TurnFacts) -> bool:
    if exp.message is not None and not _found(exp.message, facts.message):
        return True
    if exp.tools is not None and sorted(exp.tools) != sorted(facts.tools):
        return True
    if exp.end is not None and exp.end != facts.end:
        return True
    if exp.children is None:
        return False
    if len(exp.children) != len(facts.children):
        return True
    for want, got in zip(exp.children, facts.children, strict=True):
        if want.seedLength != (got.seed_length > 0):
            return True
        if want.message is not None and not _found(want.message, got.returned):
            return True
    return False


def check_expectations(
    expectations: Sequence[PromptExpectation], logs: Sequence[Sequence[Any]]
) -> list[str]:
    """One sentence per prompt whose turn misses its expectation (empty when all are met)."""
    turns = turn_facts(logs)
    out: list[str] = []
    for exp in expectations:
        if exp.prompt > len(turns):
            out.append(
                f"prompt {exp.prompt}: expected {exp.describe()}; "
                f"came: the recording has only {len(turns)} turns"
            )
            continue
        facts = turns[exp.prompt - 1]
        if _misses(exp, facts):
            out.append(f"prompt {exp.prompt}: expected {exp.describe()}; came: {facts.describe()}")
    return out

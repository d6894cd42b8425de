"""The tool contract the agent loop executes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dsh_core._model import ToolSpec

if TYPE_CHECKING:
    from dsh_core._agent import Agent
    from dsh_core._session import Session

__all__ = ["INVALID_ARGS", "UNKNOWN_TOOL", "Tool", "ToolContext", "ToolOutcome", "is_parallel_safe"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a tool call runs: the calling session, its cwd, the call's position, the agent."""

    session: Session
    cwd: str
    turn: int
    step: int
    call_id: str
    agent: Agent


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """The tool's result text (logged in ``tool/result``), whether it is an error, and the
    error's ``{name, code}`` when it has one (logged as ``error``, as upstream logs a
    ``HarnessError``'s, e.g. ``{"name": "ToolArgsError", "code": "INVALID_ARGS"}``)."""

    text: str
    is_error: bool = False
    error: Mapping[str, str] | None = None


INVALID_ARGS = {"name": "ToolArgsError", "code": "INVALID_ARGS"}
UNKNOWN_TOOL = {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}


@runtime_checkable
class Tool(Protocol):
    """A tool the model can call. ``spec.name`` is the name the model uses."""

    @property
    def spec(self) -> ToolSpec: ...

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        """Run with the model's parsed arguments; failures are error outcomes, not raises."""
        ...


def is_parallel_safe(tool: Tool) -> bool:
    """Whether ``tool`` may run concurrently with its neighbours in one step.

    A tool opts in with a true ``parallel_safe`` attribute (the subagent tools do: a child
    never writes its parent's log); every other tool is a barrier that runs alone, as
    upstream classifies any tool without ``isConcurrencySafe``.
    """
    return getattr(tool, "parallel_safe", False) is True

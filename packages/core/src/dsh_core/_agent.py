"""The agent loop: a turn runs steps, a step is one ``stream()`` call plus its tool calls.

Every event is recorded in the session as it happens (chunks as they arrive) and the session
is flushed before each tool runs and at every ``step/end`` and ``turn/end``, so a crash leaves
a log the stores can load and close. The shapes written are the upstream June-2026 ones.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from dsh_core._loop_profile import (
    DEFAULT_LOOP_PROFILE,
    DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    LoopBehaviour,
    LoopProfile,
    loop_behaviour,
)
from dsh_core._model import Delegation, ModelClient
from dsh_core._session import Session, SessionStore
from dsh_core._tools import Tool
from dsh_core._turn import EventListener, TurnOutcome, TurnRun, next_turn_number

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "Agent",
    "AgentConfig",
    "EventListener",
    "TurnOutcome",
    "next_turn_number",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are a coding agent working in the user's workspace. Use the tools you are given when "
    "they help; answer concisely, and when the user asks for an exact reply, give exactly that."
)


# Set while a turn runs in the current task, so a nested turn (a subagent child running in
# its parent's task) lets a cancellation through after closing its own log instead of
# swallowing it: the parent's turn must see the cancellation and abort too.
_IN_TURN: contextvars.ContextVar[bool] = contextvars.ContextVar("dsh_in_turn", default=False)


@dataclass(frozen=True)
class AgentConfig:
    """Agent settings.

    Attributes:
        system_prompt: sent as ``ModelRequest.system`` on every step.
        max_steps: steps per turn; a turn that would need more ends with ``STEP_LIMIT``.
        max_delegation_depth: deepest ``delegationDepth`` a subagent child may have;
            ``None`` takes the profile's (june 1, current 3).
        profile: which era of upstream's loop to reproduce (see ``dsh_core.LoopProfile``).
        max_parallel_tool_calls: parallel-safe calls in flight at once (``current`` only).
    """

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_steps: int = 50
    max_delegation_depth: int | None = None
    profile: LoopProfile = DEFAULT_LOOP_PROFILE
    max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS

    @property
    def behaviour(self) -> LoopBehaviour:
        """What :attr:`profile` decides."""
        return loop_behaviour(self.profile)

    @property
    def delegation_depth_limit(self) -> int:
        """:attr:`max_delegation_depth`, or the profile's default when it is ``None``."""
        if self.max_delegation_depth is not None:
            return self.max_delegation_depth
        return self.behaviour.max_delegation_depth


class Agent:
    """Runs turns of a session against a model with a set of tools.

    Attributes:
        model: the model client every step streams from.
        store: where subagent children are created.
        tools: the tools by name, in the order given (the order the model is told them).
        config: the agent settings.
    """

    def __init__(
        self,
        model: ModelClient,
        store: SessionStore,
        tools: Sequence[Tool],
        config: AgentConfig = AgentConfig(),
    ) -> None:
        if config.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {config.max_steps}")
        if config.max_parallel_tool_calls < 1:
            raise ValueError(
                f"max_parallel_tool_calls must be at least 1, got {config.max_parallel_tool_calls}"
            )
        _check_max_depth(config.max_delegation_depth)
        config.behaviour  # noqa: B018 - an unknown profile fails here, not at the first turn
        by_name: dict[str, Tool] = {}
        for tool in tools:
            name = tool.spec["name"]
            if name in by_name:
                raise ValueError(f"two tools are named {name!r}; tool names must be unique")
            by_name[name] = tool
        self.model = model
        self.store = store
        self.tools: Mapping[str, Tool] = MappingProxyType(by_name)
        self.config = config

    async def run_turn(
        self,
        session: Session,
        prompt: str,
        *,
        listener: EventListener | None = None,
        delegation: Delegation | None = None,
    ) -> TurnOutcome:
        """Run one user turn to its end and return how it ended.

        Model and tool failures end the turn (or the tool call) with an error that is logged;
        they are not raised. If the task running this is cancelled, the turn is closed as
        ``aborted`` (a pending tool call gets a cancelled result), the log is flushed, and the
        outcome is returned with the task's cancellation consumed.

        Args:
            session: the session to continue (turn = last ``turn/start`` + 1, seed included).
            prompt: the user's message text.
            listener: called with every event recorded, as it is recorded. An exception it
                raises propagates and leaves the turn open (a store closes it as
                ``interrupted`` on the next resume).
            delegation: for a subagent child's turn, the parent call it answers (sent on
                every model request of the turn).

        Returns:
            The turn's outcome.
        """
        nested = _IN_TURN.get()
        token = _IN_TURN.set(True)
        run = TurnRun(self, session, listener, delegation)
        try:
            return await run.run(prompt)
        except asyncio.CancelledError:
            outcome = run.abort()
            if nested:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return outcome
        finally:
            _IN_TURN.reset(token)


_MAX_SAFE_INTEGER = 2**53 - 1
"""JavaScript's ``Number.MAX_SAFE_INTEGER``: upstream's bound on a depth cap."""


def _check_max_depth(value: object) -> None:
    """Upstream's ``assertSubagentMaxDepth``: a cap is absent or a non-negative safe integer
    (no bool, no float, not above ``Number.MAX_SAFE_INTEGER``), in its words."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SAFE_INTEGER:
        raise ValueError(f"subagent maxDepth must be a non-negative safe integer, got {value!r}")

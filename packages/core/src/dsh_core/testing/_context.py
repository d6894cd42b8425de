"""A ``ToolContext`` for calling one tool directly in a test, without running a turn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dsh_core._agent import Agent
from dsh_core._bash import BashTool
from dsh_core._session import CreateOptions, SessionMeta
from dsh_core._tools import Tool, ToolContext
from dsh_core.testing._memory import InMemorySessionStore
from dsh_core.testing._scripted import ScriptedModel

__all__ = ["tool_context"]


def tool_context(cwd: Path | str, tools: Sequence[Tool] | None = None) -> ToolContext:
    """The context of call ``c`` in turn 1, step 1 of a fresh in-memory session at ``cwd``.

    Args:
        cwd: the session's working directory (the tool runs there).
        tools: the agent's tools; by default one ``BashTool``.

    Returns:
        A context whose agent has a scripted model with no entries and an in-memory store.
    """
    store = InMemorySessionStore()
    session = store.create(CreateOptions(meta=SessionMeta(cwd=str(cwd))))
    agent = Agent(ScriptedModel(), store, list(tools) if tools is not None else [BashTool()])
    return ToolContext(session=session, cwd=str(cwd), turn=1, step=1, call_id="c", agent=agent)

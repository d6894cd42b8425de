"""The delegation tool: runs a child session in-process through a ``SubagentBackend``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_core._model import ToolSpec
from dsh_core._subagent import SubagentBackend, SubagentRequest
from dsh_core._tools import INVALID_ARGS, ToolContext, ToolOutcome

__all__ = ["SubagentTool"]


class SubagentTool:
    """A tool that delegates a prompt to a child session and returns the child's final text.

    The backend decides the tool's name and description, the child's seed and its header;
    this tool checks the delegation depth, creates the child in the parent agent's store and
    runs one turn of it with the same agent. The child's events are not passed to the parent
    turn's listener: a client sees the delegation only as the tool call and its result.

    Args:
        backend: how children are seeded and stamped (spawn or fork).
    """

    def __init__(self, backend: SubagentBackend) -> None:
        self.backend = backend

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.backend.tool_name,
            description=self.backend.tool_description,
            parameters={
                "type": "object",
                "properties": {
                    "description": {
                        "type": "string",
                        "description": "A short (3-5 word) summary of the subtask.",
                    },
                    "prompt": {
                        "type": "string",
                        "description": "The complete instructions for the subagent.",
                    },
                },
                "required": ["description", "prompt"],
                "additionalProperties": False,
            },
        )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        """Run the child turn.

        Returns:
            The child's final text; an error outcome when the arguments are invalid, the
            depth limit is exceeded (no child is created) or the child's turn did not complete.
        """
        violations = [
            f'missing required property "{key}"' if value is None else f'"{key}" must be a string'
            for key in ("description", "prompt")
            if not isinstance(value := arguments.get(key), str)
        ]
        if violations:
            text = f"Error: invalid arguments: {'; '.join(violations)}"
            return ToolOutcome(text, True, INVALID_ARGS)
        description, prompt = str(arguments["description"]), str(arguments["prompt"])
        agent = context.agent
        parent = context.session
        depth = (parent.header.delegation_depth or 0) + 1
        limit = agent.config.max_delegation_depth
        if depth > limit:
            return ToolOutcome(f"delegation depth {depth} exceeds the maximum {limit}", True)
        # The child's seed (fork) and any reader of the store must see the parent's log up to
        # this call.
        parent.flush()
        options = self.backend.child_options(parent, SubagentRequest(description, prompt), depth)
        child = agent.store.create(options)
        try:
            outcome = await agent.run_turn(child, prompt)
        finally:
            child.close()
        if outcome.kind == "completed":
            return ToolOutcome(outcome.final_text)
        # Upstream's words for a child that did not finish (tool-subagent stopReasonError);
        # the reason, never partial output.
        reason = _KIND_TEXT.get(outcome.kind, f"subagent run ended abnormally ({outcome.kind})")
        return ToolOutcome(f"Error: {reason}", True)


_KIND_TEXT = {
    "aborted": "subagent run was cancelled",
    "error": "subagent run failed",
    "max-tokens": "subagent run hit its token limit before finishing",
}

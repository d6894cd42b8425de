"""The delegation tool: runs a child session in-process through a ``SubagentBackend``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from dsh_core._events import Event
from dsh_core._model import Delegation, ToolSpec
from dsh_core._subagent import SubagentBackend, SubagentRequest
from dsh_core._tools import INVALID_ARGS, ToolContext, ToolOutcome
from dsh_core._validate import validate_arguments

__all__ = ["SubagentTool"]


class SubagentTool:
    """A tool that delegates a prompt to a child session and returns the child's final text.

    The backend decides the tool's name and description, the child's seed and its header;
    this tool checks the delegation depth, creates the child in the parent agent's store and
    runs one turn of it with the same agent. The child's events are not passed to the parent
    turn's listener: a client sees the delegation only as the tool call and its result.

    Sibling delegations are independent (a child never writes its parent's log), so the tool
    is parallel-safe: under the ``current`` loop profile they run concurrently.

    Args:
        backend: how children are seeded and stamped (spawn or fork).
    """

    parallel_safe = True

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
        violations = validate_arguments(self.spec["parameters"], arguments)
        if violations:
            text = f"Error: invalid arguments: {'; '.join(violations)}"
            return ToolOutcome(text, True, INVALID_ARGS)
        description, prompt = str(arguments["description"]), str(arguments["prompt"])
        agent = context.agent
        parent = context.session
        depth = (parent.header.delegation_depth or 0) + 1
        limit = agent.config.delegation_depth_limit
        strict = agent.config.behaviour.strict_child_outcome
        if depth > limit:
            if strict:  # upstream's SubagentDepthError, surfaced as the tool's error
                return ToolOutcome(f"Error: subagent depth {depth} exceeds maxDepth {limit}", True)
            return ToolOutcome(f"delegation depth {depth} exceeds the maximum {limit}", True)
        # The child's seed (fork) and any reader of the store must see the parent's log up to
        # this call.
        parent.flush()
        options = self.backend.child_options(parent, SubagentRequest(description, prompt), depth)
        child = agent.store.create(options)
        delegation = Delegation(parent.id, context.call_id, prompt)
        try:
            outcome = await agent.run_turn(child, prompt, delegation=delegation)
            own_events = child.events[child.header.seed_length or 0 :]
        finally:
            child.close()
        if strict:
            return _current_outcome(outcome.kind, own_events)
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


# Upstream's later tool-subagent wording (stopReasonError), by the child's turn/end kind.
_STOP_TEXT = {
    "aborted": "subagent run was cancelled",
    "interrupted": "subagent run was cancelled",
    "error": "subagent run failed",
    "max-tokens": "subagent run hit its token limit before finishing",
}


def _current_outcome(kind: str, events: Sequence[Event]) -> ToolOutcome:
    """The parent's result under the ``current`` profile: the child's final output on
    ``completed``; otherwise an error naming how it stopped, with any partial output."""
    output = final_assistant_text(events)
    if kind == "completed":
        return ToolOutcome(output)
    headline = _STOP_TEXT.get(kind, f"subagent run ended abnormally ({kind})")
    partial = f"\nPartial output before the run ended:\n{output}" if output else ""
    return ToolOutcome(f"Error: {headline}{partial}", True)


def final_assistant_text(events: Sequence[Event]) -> str:
    """A child's final output, as upstream's later ``finalAssistantOutput`` selects it.

    The text of the last ``assistant/message`` with any content; when there is none, every
    streamed text delta joined (a turn cut off mid-stream has chunks but no message).
    """
    message: list[Any] | None = None
    streamed: list[str] = []
    for event in events:
        if event.type == "assistant/message":
            content = event.data.get("content")
            inner = event.data.get("message")
            if content is None and isinstance(inner, Mapping):  # the later upstream shape
                content = cast(Mapping[str, Any], inner).get("content")
            if isinstance(content, list) and content:
                message = cast(list[Any], content)
        elif event.type == "assistant/chunk":
            chunk = event.data.get("chunk")
            if isinstance(chunk, Mapping):
                delta = cast(Mapping[str, Any], chunk)
                text = delta.get("text")
                if delta.get("type") == "text-delta" and isinstance(text, str):
                    streamed.append(text)
    if message is None:
        return "".join(streamed)
    return "".join(
        cast(str, block["text"])
        for block in message
        if isinstance(block, Mapping)
        and cast(Mapping[str, Any], block).get("type") == "text"
        and isinstance(cast(Mapping[str, Any], block).get("text"), str)
    )

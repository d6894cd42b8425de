"""The fork backend: a child seeded with the parent's completed turns."""

from __future__ import annotations

from dsh_core import CreateOptions, Session, SessionMeta, SubagentRequest, completed_turn_prefix

__all__ = ["FORK_TOOL_DESCRIPTION", "ForkBackend"]

FORK_TOOL_DESCRIPTION = (
    "Delegate a subtask to a forked subagent. The fork starts with a copy of this "
    "conversation up to the end of the previous user turn (it knows what was said before, "
    "but not the current turn), works in the same directory with the same tools, and returns "
    "its final reply as this tool's result. Use it when the subtask depends on earlier context."
)


class ForkBackend:
    """Children start with the parent's completed-turn prefix as their seed.

    The seed is every parent event up to and including the last ``turn/end``; the header's
    ``seedLength`` says how many events that is, so replay can tell the child's own events
    from inherited ones. With no completed turn the seed is empty and ``seedLength`` is left
    out, exactly as for a spawned child.
    """

    @property
    def tool_name(self) -> str:
        return "subagent_fork"

    @property
    def tool_description(self) -> str:
        return FORK_TOOL_DESCRIPTION

    def child_options(self, parent: Session, request: SubagentRequest, depth: int) -> CreateOptions:
        """Options for a child of ``parent`` seeded with its completed turns."""
        seed = completed_turn_prefix(parent.events)
        return CreateOptions(
            seed=seed,
            meta=SessionMeta(
                cwd=parent.header.cwd,
                parent_session=parent.id,
                seed_length=len(seed) if seed else None,
                origin="subagent",
                delegation_depth=depth,
            ),
        )

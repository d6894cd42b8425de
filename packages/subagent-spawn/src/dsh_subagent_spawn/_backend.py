"""The spawn backend: a fresh child session with no inherited history."""

from __future__ import annotations

from dsh_core import CreateOptions, Session, SessionMeta, SubagentRequest

__all__ = ["SPAWN_TOOL_DESCRIPTION", "SpawnBackend"]

SPAWN_TOOL_DESCRIPTION = (
    "Delegate a self-contained subtask to a new subagent. The subagent starts with an empty "
    "conversation: it sees only the prompt you give it (not this conversation), works in the "
    "same directory with the same tools, and returns its final reply as this tool's result. "
    "Put everything it needs in the prompt."
)


class SpawnBackend:
    """Children start empty: no seed, no ``seedLength``; ``parentSession``, ``origin``,
    ``delegationDepth`` and the parent's cwd in the header."""

    @property
    def tool_name(self) -> str:
        return "subagent"

    @property
    def tool_description(self) -> str:
        return SPAWN_TOOL_DESCRIPTION

    def child_options(self, parent: Session, request: SubagentRequest, depth: int) -> CreateOptions:
        """Options for an empty child of ``parent`` at delegation depth ``depth``."""
        return CreateOptions(
            meta=SessionMeta(
                cwd=parent.header.cwd,
                parent_session=parent.id,
                origin="subagent",
                delegation_depth=depth,
            )
        )

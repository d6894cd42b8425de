"""The subagent-backend contract: how a child session is seeded and stamped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dsh_core._session import CreateOptions, Session

__all__ = ["SubagentBackend", "SubagentRequest"]


@dataclass(frozen=True, slots=True)
class SubagentRequest:
    """The model's ``{description, prompt}`` for a delegation."""

    description: str
    prompt: str


@runtime_checkable
class SubagentBackend(Protocol):
    """Decides a child's seed and header; core's ``SubagentTool`` runs the child.

    Implementations: ``dsh_subagent_spawn.SpawnBackend`` (tool ``subagent``) and
    ``dsh_subagent_fork.ForkBackend`` (tool ``subagent_fork``).
    """

    @property
    def tool_name(self) -> str: ...

    @property
    def tool_description(self) -> str: ...

    def child_options(self, parent: Session, request: SubagentRequest, depth: int) -> CreateOptions:
        """Create options for the child of ``parent`` at delegation depth ``depth``.

        Must set ``meta.parent_session``, ``meta.origin = "subagent"``,
        ``meta.delegation_depth = depth`` and ``meta.cwd``; a fork also sets the seed and
        ``meta.seed_length``.
        """
        ...

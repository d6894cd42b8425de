"""A driver for a real ``dsh-acp-agent`` subprocess, for tests and tools.

``AgentProcess`` starts the agent, writes JSON-RPC requests to its stdin and keeps every frame it
writes to stdout, in arrival order, for comparison. Lines on stdout that are not JSON-RPC frames
are kept apart in :attr:`AgentProcess.stray_lines`: there must be none. Every wait has a timeout,
so a stuck agent becomes an :class:`AgentProcessError` carrying the tail of its stderr instead of
a hung test. ``AgentRun`` bundles a workspace and a sessions root around it; ``text_reply`` and
``tool_reply`` build the chunks of one scripted model call. The snapshot runner
(``dsh_snapshot``) drives scenarios through an ``AgentProcess`` it holds.
"""

from dsh_acp_agent.testing._process import (
    AgentProcess,
    AgentProcessError,
    AgentRun,
    DeadlineError,
    ResponseError,
    agent_environment,
)
from dsh_acp_agent.testing._replies import text_reply, tool_reply

__all__ = [
    # the driver and what it raises
    "AgentProcess",
    "AgentProcessError",
    "DeadlineError",
    "ResponseError",
    "agent_environment",
    # a workspace and sessions root around one agent
    "AgentRun",
    # scripted model replies
    "text_reply",
    "tool_reply",
]

"""dsh-subagent-fork: the fork subagent backend (tool ``subagent_fork``).

A forked child starts with a copy of the parent's completed turns (its seed) and records how
many events it inherited in the header's ``seedLength``. Use it with core's ``SubagentTool``::

    agent = Agent(model, store, [BashTool(), SubagentTool(ForkBackend())])
"""

from dsh_subagent_fork._backend import FORK_TOOL_DESCRIPTION, ForkBackend

__all__ = ["FORK_TOOL_DESCRIPTION", "ForkBackend"]

"""dsh-subagent-spawn: the spawn subagent backend (tool ``subagent``).

A spawned child is a fresh session: it inherits no history, only the parent's cwd, and its
header names the parent (``parentSession``, ``origin: "subagent"``, ``delegationDepth``).
Use it with core's ``SubagentTool``::

    agent = Agent(model, store, [BashTool(), SubagentTool(SpawnBackend())])
"""

from dsh_subagent_spawn._backend import SPAWN_TOOL_DESCRIPTION, SpawnBackend

__all__ = ["SPAWN_TOOL_DESCRIPTION", "SpawnBackend"]

"""dsh-acp-agent: the dsh agent process, speaking the Agent Client Protocol over stdio.

Run it as ``dsh-acp-agent`` (or ``python -m dsh_acp_agent``); it is configured by ``DSH_*``
environment variables (see :class:`AgentSettings`) and serves ``initialize``,
``session/new``, ``session/load``, ``session/prompt`` and ``session/cancel``.

Importing this package is cheap: each name is imported from its module on first use (the
``acp`` schema alone costs about half a second), so a tool that only needs the fork server or
the settings does not pay for the whole agent.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh_acp_agent._exit import EXIT_OK, EXIT_REPLAY_NOT_CONSUMED, EXIT_USAGE
    from dsh_acp_agent._forkserver import AgentForkServer, ForkedAgent, ForkServerError
    from dsh_acp_agent._main import build_agent, main
    from dsh_acp_agent._server import AGENT_NAME, AcpServer, ProtocolError, build_router
    from dsh_acp_agent._settings import AgentSettings, SettingsError, load_settings
    from dsh_acp_agent._updates import UpdateMapper, replay_updates

__all__ = [
    # the process: its entry point, wiring and exit codes
    "EXIT_OK",
    "EXIT_REPLAY_NOT_CONSUMED",
    "EXIT_USAGE",
    "build_agent",
    "main",
    # settings
    "AgentSettings",
    "SettingsError",
    "load_settings",
    # the protocol: server, routing, updates
    "AGENT_NAME",
    "AcpServer",
    "ProtocolError",
    "UpdateMapper",
    "build_router",
    "replay_updates",
    # a warm agent: one pre-imported parent forking a fresh process per run
    "AgentForkServer",
    "ForkServerError",
    "ForkedAgent",
]

_HOMES = {
    "AGENT_NAME": "_server",
    "AcpServer": "_server",
    "ProtocolError": "_server",
    "build_router": "_server",
    "EXIT_OK": "_exit",
    "EXIT_REPLAY_NOT_CONSUMED": "_exit",
    "EXIT_USAGE": "_exit",
    "build_agent": "_main",
    "main": "_main",
    "AgentForkServer": "_forkserver",
    "ForkServerError": "_forkserver",
    "ForkedAgent": "_forkserver",
    "AgentSettings": "_settings",
    "SettingsError": "_settings",
    "load_settings": "_settings",
    "UpdateMapper": "_updates",
    "replay_updates": "_updates",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'dsh_acp_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"dsh_acp_agent.{home}"), name)
    globals()[name] = value  # the next lookup is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

"""dsh-acp-agent: the dsh agent process, speaking the Agent Client Protocol over stdio.

Run it as ``dsh-acp-agent`` (or ``python -m dsh_acp_agent``); it is configured by ``DSH_*``
environment variables (see :class:`AgentSettings`) and serves ``initialize``,
``session/new``, ``session/load``, ``session/prompt`` and ``session/cancel``.
"""

from dsh_acp_agent._main import (
    EXIT_OK,
    EXIT_REPLAY_NOT_CONSUMED,
    EXIT_USAGE,
    build_agent,
    main,
)
from dsh_acp_agent._server import AGENT_NAME, AcpServer, ProtocolError, build_router
from dsh_acp_agent._settings import AgentSettings, SettingsError, load_settings
from dsh_acp_agent._updates import UpdateMapper, replay_updates

__all__ = [
    # protocol
    "AGENT_NAME",
    # the process
    "EXIT_OK",
    "EXIT_REPLAY_NOT_CONSUMED",
    "EXIT_USAGE",
    "AcpServer",
    # settings
    "AgentSettings",
    "ProtocolError",
    "SettingsError",
    "UpdateMapper",
    "build_agent",
    "build_router",
    "load_settings",
    "main",
    "replay_updates",
]

"""dsh-acp-agent's public API, pinned: a change to an ``__all__`` must be deliberate."""

from __future__ import annotations

import pytest

from dsh_core.testing import assert_public_api

_PUBLIC: dict[str, list[str]] = {
    "dsh_acp_agent": [
        "AGENT_NAME",
        "AcpServer",
        "AgentForkServer",
        "AgentSettings",
        "EXIT_OK",
        "EXIT_REPLAY_NOT_CONSUMED",
        "EXIT_USAGE",
        "ForkServerError",
        "ForkedAgent",
        "ProtocolError",
        "SettingsError",
        "UpdateMapper",
        "build_agent",
        "build_router",
        "load_settings",
        "main",
        "replay_updates",
    ],
    "dsh_acp_agent.testing": [
        "AgentProcess",
        "AgentProcessError",
        "AgentRun",
        "DeadlineError",
        "ResponseError",
        "agent_environment",
        "text_reply",
        "tool_reply",
    ],
}


@pytest.mark.parametrize("name", list(_PUBLIC))
def test_public_names_are_pinned(name: str) -> None:
    assert_public_api(name, _PUBLIC[name])

"""What a test agent's clean environment keeps and drops (``agent_environment``)."""

from __future__ import annotations

import pytest

from dsh_acp_agent.testing import _process as process
from dsh_acp_agent.testing import agent_environment
from dsh_core import ALLOW_MODEL_REQUESTS_ENV


def test_dsh_and_provider_variables_are_dropped_and_overrides_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSH_STORE", "sqlite")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "from-the-caller")
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")
    env = agent_environment({"DSH_SESSIONS_ROOT": "/run/root"})
    assert "DSH_STORE" not in env
    assert "DEEPSEEK_API_KEY" not in env
    assert env[ALLOW_MODEL_REQUESTS_ENV] == "0"
    assert env["DSH_SESSIONS_ROOT"] == "/run/root"


def test_a_store_backends_variables_reach_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    # The installed stores here need no settings; stand in one that declares a server's.
    monkeypatch.setattr(process, "store_env_prefixes", lambda: ("DSH_FAKESERVER_", "FAKEPG"))
    monkeypatch.setenv("DSH_FAKESERVER_DSN", "host=/run/db")
    monkeypatch.setenv("FAKEPGHOST", "/run/db")
    monkeypatch.setenv("DSH_OTHER", "dropped")
    env = agent_environment({"DSH_FAKESERVER_DSN": "host=/override"})
    assert env["DSH_FAKESERVER_DSN"] == "host=/override"
    assert env["FAKEPGHOST"] == "/run/db"
    assert "DSH_OTHER" not in env

"""What a test agent's clean environment keeps and drops (``agent_environment``)."""

from __future__ import annotations

import pytest

from dsh_acp_agent.testing import _process as process
from dsh_acp_agent.testing import agent_environment
from dsh_core import ALLOW_MODEL_REQUESTS_ENV
from dsh_core.plugins import secret_env_names


def test_dsh_and_provider_variables_are_dropped_and_overrides_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSH_STORE", "sqlite")
    keys = secret_env_names()  # every installed provider's key variable
    assert keys
    for name in keys:
        monkeypatch.setenv(name, "from-the-caller")
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")
    env = agent_environment({"DSH_SESSIONS_ROOT": "/run/root"})
    assert "DSH_STORE" not in env
    assert [name for name in keys if name in env] == []
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

"""Fixtures shared by the dsh-acp-agent tests: the corpus, a model server, agent runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_acp_agent.testing import AgentRun, agent_environment
from dsh_core.plugins import DEFAULT_MODEL_PROVIDER
from dsh_core.testing import corpus_unavailable, upstream_corpus
from dsh_scripted_server import ScriptedModelServer


@pytest.fixture
def june_corpus() -> Path:
    """``$DSH_UPSTREAM_CORPUS/june`` (default ``../shared/upstream-corpus`` beside the checkout)."""
    root = (upstream_corpus(__file__) or Path("upstream-corpus (not found)")) / "june"
    if not root.is_dir():
        corpus_unavailable(f"upstream corpus {root} is absent (set DSH_UPSTREAM_CORPUS)")
    return root


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """A scripted server on 127.0.0.1 playing the default model provider's profile."""
    with ScriptedModelServer(profile=DEFAULT_MODEL_PROVIDER) as server:
        yield server


@pytest.fixture
def agent_run(tmp_path: Path, model_server: ScriptedModelServer) -> AgentRun:
    """Environment for an agent talking to ``model_server``, with temporary directories."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    root = tmp_path / "sessions"
    # The provider's own variables (base URL, key, the session header the server routes
    # by), named by its settings model.
    retry_wait = model_server.profile.env_name("retry_base_wait")
    env = agent_environment(
        {
            "DSH_MODEL_CLIENT": DEFAULT_MODEL_PROVIDER,
            **model_server.client_env("test-key-not-secret"),
            retry_wait: "0",
            "DSH_SESSIONS_ROOT": str(root),
        }
    )
    return AgentRun(workspace, root, env)

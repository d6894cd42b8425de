"""Fixtures shared by the dsh-acp-agent tests: the corpus, a model server, agent runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_acp_agent.testing import AgentRun, agent_environment
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
    """A scripted DeepSeek-compatible server on 127.0.0.1."""
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def agent_run(tmp_path: Path, model_server: ScriptedModelServer) -> AgentRun:
    """Environment for an agent talking to ``model_server``, with temporary directories."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    root = tmp_path / "sessions"
    env = agent_environment(
        {
            "DSH_MODEL_CLIENT": "deepseek",
            "DEEPSEEK_BASE_URL": model_server.base_url,
            # The scripted server routes each request to its session by this header.
            "DEEPSEEK_SEND_SESSION_ID": "true",
            "DEEPSEEK_API_KEY": "test-key-not-secret",
            "DEEPSEEK_RETRY_BASE_WAIT": "0",
            "DSH_SESSIONS_ROOT": str(root),
        }
    )
    return AgentRun(workspace, root, env)

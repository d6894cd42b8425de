"""The gate and the proxy on the PostgreSQL store, through the real agent, on a real server.

The server is a private one (``dsh_persistence_postgres.testing``: initdb + pg_ctl) or the one
``DSH_TEST_POSTGRES_DSN`` names. Its address reaches the agent only through the settings the
store backend declares (``DSH_POSTGRES_DSN``, kept by ``agent_environment``), and a finished
run leaves no namespace behind (``store_run`` discards it).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from dsh_acp_agent.testing import agent_environment
from dsh_core import Chunk
from dsh_core.plugins import default_store_backend_names, store_backend
from dsh_llm_proxy import STORE_MARKER, ProxyServer, recorded_logs
from dsh_persistence_postgres.testing import server_for_tests
from dsh_scripted_server import ScriptedModelServer
from dsh_snapshot import SnapshotSettings, load_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent
FORK = ROOT / "snapshots" / "sdk" / "subagent-fork-in-process"


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    with server_for_tests() as dsn:
        yield dsn


@pytest.fixture
def configured(postgres_dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The caller's environment names the server, as a team's CI job would."""
    monkeypatch.setenv("DSH_POSTGRES_DSN", postgres_dsn)
    return postgres_dsn


def _run_namespaces(dsn: str) -> int:
    """Namespaces of gate runs left in the database (their roots are dsh-snap-* folders)."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        exists = connection.execute("SELECT to_regclass('dsh.namespaces')").fetchone()
        if exists is None or exists[0] is None:
            return 0
        row = connection.execute(
            "SELECT count(*) FROM dsh.namespaces WHERE root LIKE %s", ("%/dsh-snap-%",)
        ).fetchone()
    return 0 if row is None else int(row[0])


def test_the_store_settings_reach_the_agent_and_nothing_else_does(
    configured: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "7")
    monkeypatch.setenv("DSH_SESSIONS_ROOT", "/the/callers/own")
    env = agent_environment({"DSH_STORE": "postgres"})
    assert env["DSH_POSTGRES_DSN"] == configured
    assert env["PGCONNECT_TIMEOUT"] == "7"
    assert "DSH_SESSIONS_ROOT" not in env  # every other DSH_* setting is still the run's own
    assert "postgres" not in default_store_backend_names()  # the gate's default needs no server


# One worker runs the gate tests: on a shared server (DSH_TEST_POSTGRES_DSN) another worker's
# run in progress would otherwise count as a namespace left behind.
@pytest.mark.e2e
@pytest.mark.xdist_group("postgres-gate")
def test_a_fork_scenario_replays_green_on_postgres(configured: str) -> None:
    scenario = load_scenario(FORK)
    # a server store runs only when the user asks for it
    result = run_scenario(scenario, SnapshotSettings(stores=("postgres",)), "postgres")
    assert result.ok, result.failures
    # the parent and its fork child were harvested from the database, seed boundary and all
    assert result.sessions == len(scenario.session_files) == 2
    assert result.calls_replayed > 0
    assert _run_namespaces(configured) == 0  # the run's namespace went with the run


@pytest.mark.e2e
@pytest.mark.xdist_group("postgres-gate")
def test_the_gate_cli_runs_postgres_when_named(configured: str, tmp_path: Path) -> None:
    gate = Path(sys.executable).with_name("dsh-snapshot")
    done = subprocess.run(
        [gate, "replay", ROOT / "snapshots" / "sdk" / "text-turn", "--store", "postgres"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 scenarios (1 runs)" in done.stdout
    assert "1 passed, 0 failed" in done.stdout
    assert _run_namespaces(configured) == 0


def test_the_proxy_records_into_postgres_and_replays_from_it(
    configured: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer: list[Chunk] = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "from postgres"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "from postgres"}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    key = "upstream-" + secrets.token_hex(12)
    monkeypatch.setenv("DSH_PG_PROXY_TEST_KEY", key)
    root = tmp_path / "recording"

    def ask(base_url: str) -> str:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        text = ""
        with (
            httpx.Client(trust_env=False, timeout=30) as http,
            http.stream("POST", base_url + "/chat/completions", json=body) as response,
        ):
            assert response.status_code == 200
            for line in response.iter_lines():
                data = line.removeprefix("data: ")
                if line.startswith("data: ") and data != "[DONE]":
                    for choice in json.loads(data).get("choices", []):
                        text += choice.get("delta", {}).get("content") or ""
        return text

    try:
        with (
            ScriptedModelServer([[answer]], api_key=key) as upstream,
            ProxyServer.record(
                root,
                store="postgres",
                upstream=upstream.base_url,
                api_key_env="DSH_PG_PROXY_TEST_KEY",
            ) as proxy,
        ):
            recorded = ask(proxy.base_url)
        # the root only names its store; the sessions are rows in the database
        assert (root / STORE_MARKER).read_text() == "postgres\n"
        assert sorted(p.name for p in root.iterdir()) == [STORE_MARKER]
        [(_, log)] = recorded_logs(root, "postgres")
        assert store_backend("postgres").list_sessions(root)[0].id == log.header.id
        with ProxyServer.replay(root, store="postgres") as proxy:
            replayed = ask(proxy.base_url)
            assert proxy.problems() == []
        assert recorded == replayed == "from postgres"
    finally:
        store_backend("postgres").discard(root)

"""The agent finds its store and model by entry point; a bad choice stops it in one line.

A plugin here is a real distribution on ``PYTHONPATH`` (a ``.dist-info`` with
``entry_points.txt``), exactly what ``importlib.metadata`` reads for an installed package.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_acp_agent.testing import AgentRun


def _install_broken_plugins(site: Path) -> None:
    dist_info = site / "broken_dsh_plugins-2.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-dsh-plugins\nVersion: 2.0\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(
        "[dsh.stores]\ncrashing = broken_dsh_plugins:STORE\n\n"
        "[dsh.models]\nnot-a-provider = broken_dsh_plugins_models:PROVIDER\n",
        encoding="utf-8",
    )
    (site / "broken_dsh_plugins.py").write_text(
        "raise ImportError('needs a driver that is not installed')\n", encoding="utf-8"
    )
    (site / "broken_dsh_plugins_models.py").write_text("PROVIDER = object()\n", encoding="utf-8")


def _start(agent_run: AgentRun, **env: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "dsh_acp_agent"],
        input=b"",
        capture_output=True,
        env={**agent_run.env, **env},
        cwd=agent_run.workspace,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == b""
    return done.stderr.decode().splitlines()


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("variable", "kind"), [("DSH_STORE", "store backend"), ("DSH_MODEL_CLIENT", "model")]
)
def test_an_unknown_name_lists_the_installed_plugins(
    agent_run: AgentRun, variable: str, kind: str
) -> None:
    [line] = _start(agent_run, **{variable: "no-such-plugin"})
    assert line.startswith(f"dsh-acp-agent: invalid {variable}='no-such-plugin': ")
    assert f"unknown {kind}" in line
    assert "choose one of " in line


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("variable", "name", "says"),
    [
        ("DSH_STORE", "crashing", "ImportError: needs a driver that is not installed"),
        ("DSH_MODEL_CLIENT", "not-a-provider", "not a model provider (ModelProvider)"),
    ],
)
def test_a_broken_plugin_names_its_entry_point_and_distribution(
    agent_run: AgentRun, tmp_path: Path, variable: str, name: str, says: str
) -> None:
    site = tmp_path / "site"
    _install_broken_plugins(site)
    path = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    [line] = _start(agent_run, **{variable: name, "PYTHONPATH": path})
    assert line.startswith(f"dsh-acp-agent: cannot start: plugin {name!r} (")
    assert "of distribution broken-dsh-plugins 2.0) is broken: " in line
    assert says in line

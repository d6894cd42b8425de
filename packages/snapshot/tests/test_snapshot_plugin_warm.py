"""The pytest plugin forks each scenario's agent from one warm agent per worker, and
``--dsh-cold`` / ``DSH_SNAPSHOT_COLD=1`` start a fresh interpreter per run instead; a batch
that only reports keeps no per-run outputs."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core.plugins import default_store_backend_names
from dsh_snapshot import COLD_ENV, SnapshotSettings, load_scenario, run

pytestmark = pytest.mark.e2e


def _gate(
    inner_pytest: Callable[..., subprocess.CompletedProcess[str]],
    tree: Path,
    *args: str,
    env: dict[str, str],
) -> dict[str, str]:
    """Run the plugin over ``tree/sdk`` in a fresh pytest; return each item's ``agent``."""
    report = tree / "report.xml"
    proc = inner_pytest(
        tree, "-q", "--dsh-snapshots", "--junitxml", str(report), *args, "sdk", env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    agents: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        for prop in case.iter("property"):
            if prop.get("name") == "agent":
                agents[str(case.get("name"))] = str(prop.get("value"))
    return agents


@pytest.mark.slow
def test_the_plugin_forks_warm_agents_unless_told_cold(
    scenario_copy: Callable[[str], Path],
    inner_pytest: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    scenarios = ("tool-call-turn", "subagent-spawn")
    (tree,) = {scenario_copy(name).parent.parent for name in scenarios}
    names = {f"sdk/{n}[{c}]" for n in scenarios for c in default_store_backend_names()}
    env = {k: v for k, v in os.environ.items() if k != COLD_ENV}
    assert _gate(inner_pytest, tree, env=env) == dict.fromkeys(names, "forked")
    assert _gate(inner_pytest, tree, "--dsh-cold", env=env) == dict.fromkeys(
        names, "fresh interpreter"
    )
    cold = _gate(inner_pytest, tree, env={**env, COLD_ENV: "1"})
    assert cold == dict.fromkeys(names, "fresh interpreter")


def test_a_batch_that_only_reports_keeps_no_outputs(
    scenario_copy: Callable[[str], Path],
) -> None:
    """The CLI keeps only verdicts: a run's logs and frames would otherwise pile up with K."""
    scenarios = [load_scenario(scenario_copy("tool-call-turn"))]
    settings = SnapshotSettings(stores=("jsonl",))
    kept = run(settings, scenarios)
    dropped = run(settings, scenarios, keep_outputs=False)
    assert kept[0].ok, kept[0].failures
    assert dropped[0].ok, dropped[0].failures
    assert kept[0].logs
    assert kept[0].frames
    assert (dropped[0].logs, dropped[0].frames) == ([], [])
    assert (dropped[0].sessions, dropped[0].calls) == (kept[0].sessions, kept[0].calls)

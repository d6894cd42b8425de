"""The pytest plugin: inert by default; one item per (scenario, store backend) when asked;
pytest-split shards cover every item exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core.plugins import default_store_backend_names
from dsh_snapshot import COLD_ENV

ROOT = Path(__file__).resolve().parents[3]


def _scenario(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(json.dumps({"steps": [{"op": "initialize"}]}))
    (folder / "snapshot.yml").write_text(
        "version: 1\nprofile: sdk\nstore: default\nrecording: scripted\n"
    )


Collect = Callable[..., list[str]]


@pytest.fixture
def collect(inner_pytest: Callable[..., subprocess.CompletedProcess[str]]) -> Collect:
    """``collect(tree, *args)``: the node ids a fresh pytest collects in ``tree``."""

    def node_ids(cwd: Path, *args: str) -> list[str]:
        proc = inner_pytest(cwd, "--collect-only", "-q", *args)
        assert proc.returncode in (0, 5), proc.stdout + proc.stderr
        return [line for line in proc.stdout.splitlines() if "::" in line]

    return node_ids


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in ("text-turn", "multi-turn", "cancel"):
        _scenario(tmp_path / "snapshots" / "sdk" / name)
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    return tmp_path


def test_inert_without_the_option(tree: Path, collect: Collect) -> None:
    assert collect(tree, "snapshots") == []
    assert collect(tree, ".") == ["test_plain.py::test_plain"]


def test_one_item_per_scenario_and_store_backend(tree: Path, collect: Collect) -> None:
    ids = collect(tree, "--dsh-snapshots", "snapshots")
    assert ids == [
        f"snapshots/sdk/{name}::sdk/{name}[{comp}]"
        for name in ("cancel", "multi-turn", "text-turn")
        for comp in default_store_backend_names()  # every installed embedded one by default
    ]
    only = collect(tree, "--dsh-snapshots", "--dsh-store", "sqlite", "snapshots/sdk/cancel")
    assert only == ["snapshots/sdk/cancel::sdk/cancel[sqlite]"]


@pytest.mark.parametrize("option", ["--dsh-persistence", "--dsh-composition"])
def test_the_old_store_options_still_work(tree: Path, collect: Collect, option: str) -> None:
    only = collect(tree, "--dsh-snapshots", option, "sqlite", "snapshots/sdk/cancel")
    assert only == ["snapshots/sdk/cancel::sdk/cancel[sqlite]"]


def test_two_split_groups_cover_every_item_once(tree: Path, collect: Collect) -> None:
    everything = collect(tree, "--dsh-snapshots", "snapshots")
    durations = tree / ".test_durations"
    durations.write_text(json.dumps({nid: 1.0 + i for i, nid in enumerate(everything)}))
    groups = [
        collect(
            tree,
            "--dsh-snapshots",
            "snapshots",
            "--splits",
            "2",
            "--group",
            str(g),
            "--durations-path",
            str(durations),
        )
        for g in (1, 2)
    ]
    assert groups[0]
    assert groups[1]
    assert sorted(groups[0] + groups[1]) == sorted(everything)


def test_committed_gate_shards_cover_every_scenario_once() -> None:
    """The CI matrix (two pytest-split groups over snapshots/) runs each scenario once."""
    if not any((ROOT / "snapshots").rglob("input.json")):
        pytest.skip("no committed scenarios under snapshots/")
    args = ["--dsh-snapshots", "snapshots", "--durations-path", str(ROOT / ".test_durations")]
    proc = [
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "--collect-only",
                "-q",
                *args,
                *extra,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        for extra in ([], ["--splits", "2", "--group", "1"], ["--splits", "2", "--group", "2"])
    ]
    everything, one, two = ([ln for ln in p.stdout.splitlines() if "::" in ln] for p in proc)
    assert everything, proc[0].stdout + proc[0].stderr
    assert one
    assert two
    assert sorted(one + two) == sorted(everything)
    assert len(set(one) & set(two)) == 0


_SPY_CONFTEST = """
    import json
    from pathlib import Path

    import dsh_snapshot._engine as engine

    real = engine.run


    def pytest_configure(config):
        def spy(settings, scenarios=None, *rest, **options):
            record = {
                "mode": settings.mode,
                "stores": list(settings.stores),
                "timeout": settings.timeout,
                "cold": settings.cold,
                "warm_agents": options.get("agents") is not None,
            }
            with Path("engine-calls.jsonl").open("a") as calls:
                calls.write(json.dumps(record) + "\\n")
            return real(settings, scenarios, *rest, **options)

        engine.run = spy
"""


@pytest.mark.e2e
def test_the_plugin_runs_each_item_through_the_engine(
    scenario_copy: Callable[[str], Path],
    tmp_path: Path,
    inner_pytest: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    scenario_copy("text-turn")
    # A plugin named with -p, not a conftest.py: with --dsh-snapshots no conftest is loaded.
    (tmp_path / "engine_spy.py").write_text(textwrap.dedent(_SPY_CONFTEST))
    env = {k: v for k, v in os.environ.items() if k != COLD_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    args = ("-p", "engine_spy", "--dsh-snapshots", "sdk", "--dsh-timeout", "30")
    proc = inner_pytest(tmp_path, *args, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [
        json.loads(line) for line in (tmp_path / "engine-calls.jsonl").read_text().splitlines()
    ]
    assert sorted(c["stores"][0] for c in calls) == sorted(default_store_backend_names())
    # Each item is one engine run, forked from this pytest process's one warm agent.
    assert all(
        (c["mode"], len(c["stores"]), c["timeout"], c["cold"], c["warm_agents"])
        == ("replay", 1, 30.0, False, True)
        for c in calls
    )
    runs = len(default_store_backend_names())
    assert f"dsh-snapshot: 1 scenarios ({runs} runs)" in proc.stdout

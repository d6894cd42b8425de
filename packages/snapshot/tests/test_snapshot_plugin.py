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
from dsh_snapshot._discover import scenario_folders

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


@pytest.mark.slow  # >= 2.5 s: nox -s tests_slow (the test command's 4-minute budget)
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


@pytest.mark.slow  # >= 2.5 s: nox -s tests_slow (the test command's 4-minute budget)
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


@pytest.mark.slow  # >= 2.5 s: nox -s tests_slow (the test command's 4-minute budget)
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


# --- the scenario tree is a pull request's data: pytest must not run it or read it as config ---

_MARKER_CODE = "import pathlib; pathlib.Path({marker!r}).write_text('imported')\n"


def test_code_planted_in_the_tree_is_never_imported(tree: Path, collect: Collect) -> None:
    markers = tree.parent / "markers"
    markers.mkdir()
    planted = {
        "snapshots/conftest.py": "root-conftest",
        "snapshots/sdk/conftest.py": "profile-conftest",
        "snapshots/sdk/cancel/conftest.py": "scenario-conftest",
        "snapshots/sdk/__init__.py": "package-init",
        "snapshots/notes/test_evil.py": "test-module",
        "snapshots/notes/conftest.py": "folder-conftest",
        "snapshots/testing/conftest.py": "test-star-conftest",
    }
    for where, marker in planted.items():
        (tree / where).parent.mkdir(parents=True, exist_ok=True)
        (tree / where).write_text(_MARKER_CODE.format(marker=str(markers / marker)))
    ids = collect(tree, "--dsh-snapshots", "snapshots")
    assert sorted({i.split("::")[0] for i in ids}) == [
        f"snapshots/sdk/{name}" for name in ("cancel", "multi-turn", "text-turn")
    ]
    assert sorted(p.name for p in markers.iterdir()) == []


def test_the_tree_is_collected_by_this_plugin_never_as_python_packages(
    tree: Path, inner_pytest: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    (tree / "snapshots" / "sdk" / "__init__.py").write_text("")
    proc = inner_pytest(tree, "--collect-only", "--dsh-snapshots", "snapshots")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "<ScenarioTree sdk>" in proc.stdout
    assert "<Package" not in proc.stdout
    assert "<Module" not in proc.stdout


def test_pytest_collects_exactly_the_scenarios_the_cli_finds(tree: Path, collect: Collect) -> None:
    # pytest's own walk skips these (norecursedirs, virtualenv detection); the CLI does not
    for name in ("build", "dist", "node_modules", "venvlike"):
        _scenario(tree / "snapshots" / "sdk" / name)
    (tree / "snapshots" / "sdk" / "venvlike" / "pyvenv.cfg").write_text("home = /usr\n")
    cli = sorted(f.relative_to(tree).as_posix() for f in scenario_folders(tree / "snapshots"))
    ids = collect(tree, "--dsh-snapshots", "snapshots")
    assert sorted({i.split("::")[0] for i in ids}) == cli
    assert "snapshots/sdk/venvlike" in cli


def test_an_input_json_that_is_not_a_file_fails_collection(
    tree: Path, inner_pytest: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    broken = tree / "snapshots" / "sdk" / "broken"
    (broken / "input.json").mkdir(parents=True)
    proc = inner_pytest(tree, "--collect-only", "-q", "--dsh-snapshots", "snapshots")
    assert proc.returncode not in (0, 5), proc.stdout
    assert "snapshots/sdk/broken" in proc.stdout + proc.stderr


def test_item_names_from_scenario_data_are_escaped(tree: Path, collect: Collect) -> None:
    folder = tree / "snapshots" / "sdk" / "bell\x1b]0;owned\x07"
    _scenario(folder)
    yml = folder / "snapshot.yml"
    yml.write_text(yml.read_text().replace("profile: sdk", 'profile: "sdk\\e[2J"'))
    ids = collect(tree, "--dsh-snapshots", "snapshots")
    assert not any("\x1b" in i or "\x07" in i for i in ids), ids
    assert any("bell" in i for i in ids), ids

"""A store backend is one new package and no edit elsewhere: the proof.

``tests/plugins/dsh-store-memory`` registers the ``dsh.stores`` entry point ``memory`` in its own
``pyproject.toml`` and no code of the workspace names it. The agent must open it, the snapshot
runner must harvest through it (listing and export, no file names) and the result must equal
the committed fixtures; the store must pass the conformance suite every backend passes.
Were any of them to bypass the registry (a hard-coded backend list, a glob for ``*.jsonl``),
``memory`` would be refused or harvest nothing and these tests would fail.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from dsh_core import SessionStore
from dsh_core.plugins import STORE_GROUP, open_store, store_backend, store_backend_names
from dsh_core.testing import StoreConformance
from dsh_snapshot import SnapshotSettings, load_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "snapshots" / "sdk" / "subagent-fork-in-process"

# Every Python file but the tests' own: the packages, the tools, the benchmarks, the noxfile.
_WORKSPACE_CODE = [
    *(path for top in ("packages", "tools", "bench") for path in (ROOT / top).rglob("*.py")),
    ROOT / "noxfile.py",
]

# A test plugin (the `test-plugins` group): tests/conftest.py skips, or fails where it must be.
pytestmark = pytest.mark.test_plugin("dsh-store-memory")


def test_the_memory_backend_is_registered_by_its_own_package_only() -> None:
    [entry] = [e for e in entry_points(group=STORE_GROUP) if e.name == "memory"]
    assert entry.dist is not None
    assert entry.dist.name == "dsh-store-memory"
    assert "memory" in store_backend_names()
    named_in = [
        str(path.relative_to(ROOT))
        for path in _WORKSPACE_CODE
        if "dsh_store_memory" in path.read_text(encoding="utf-8")
    ]
    assert named_in == []


@pytest.mark.e2e
def test_a_committed_scenario_replays_through_the_memory_backend() -> None:
    scenario = load_scenario(SCENARIO)
    result = run_scenario(scenario, SnapshotSettings(), "memory")
    assert result.ok, result.failures
    # every committed log (the parent and its fork child) was harvested from the memory store
    assert result.sessions == len(scenario.session_files) == 2
    assert result.calls_replayed > 0


@pytest.mark.e2e
def test_the_cli_runs_the_memory_backend_by_name(tmp_path: Path) -> None:
    gate = Path(sys.executable).with_name("dsh-snapshot")
    done = subprocess.run(
        [gate, "replay", ROOT / "snapshots" / "sdk" / "text-turn", "--store", "memory"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sdk/text-turn" in done.stdout
    assert "1 scenarios (1 runs)" in done.stdout
    assert "1 passed, 0 failed" in done.stdout


def test_a_store_nobody_registered_is_refused_naming_the_installed_ones() -> None:
    result = run_scenario(load_scenario(SCENARIO), SnapshotSettings(), "no-such-store")
    assert not result.ok
    assert "unknown store backend 'no-such-store'" in result.failures[0]
    assert "memory" in result.failures[0]


def test_memory_lists_and_exports_across_handles(tmp_path: Path) -> None:
    from dsh_core import CreateOptions, SessionMeta  # noqa: PLC0415 - this test only

    root = tmp_path / "sessions"
    backend = store_backend("memory")
    store = open_store("memory", root)
    session = store.create(CreateOptions("only", meta=SessionMeta(created_at=7)))
    session.close()
    assert [h.id for h in backend.list_sessions(root)] == ["only"]  # live, in this process
    store.close()
    assert [h.id for h in backend.list_sessions(root)] == ["only"]  # from the dump
    assert backend.export_log(root, "only").startswith('{"type":"session","version":0,"id":"only"')


class TestMemoryPluginConformance(StoreConformance):
    """The conformance suite against stores opened through the registry, by name."""

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[[], SessionStore]:
        return lambda: open_store("memory", tmp_path / "sessions")

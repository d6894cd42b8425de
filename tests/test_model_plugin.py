"""A model provider is one new package and no edit elsewhere: the proof.

``tests/plugins/dsh-model-acme`` registers the ``dsh.models`` entry point ``acme`` (a profile
on the chat-completions wire with its own ``ACME_*`` variables, models and request field) in
its own ``pyproject.toml``, and no code of the workspace names it. ``record --scripted`` must
run our agent on it (the scripted server playing its profile, the agent's variables taken from
its settings model) and the recording must replay. Were anything to hard-code DeepSeek's
variables or models, the agent would call the wrong provider or the server would refuse it.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

from dsh_core import read_log_text
from dsh_core.plugins import MODEL_GROUP, model_provider_names
from dsh_snapshot import SnapshotSettings, load_scenario, run_scenario
from dsh_snapshot.testing import copy_scenario

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "snapshots" / "sdk" / "tool-call-turn"

# Every Python file but the tests' own: the packages, the tools, the benchmarks, the noxfile.
_WORKSPACE_CODE = [
    *(path for top in ("packages", "tools", "bench") for path in (ROOT / top).rglob("*.py")),
    ROOT / "noxfile.py",
]

# A test plugin (the `test-plugins` group): tests/conftest.py skips, or fails where it must be.
pytestmark = pytest.mark.test_plugin("dsh-model-acme")


def test_the_acme_provider_is_registered_by_its_own_package_only() -> None:
    [entry] = [e for e in entry_points(group=MODEL_GROUP) if e.name == "acme"]
    assert entry.dist is not None
    assert entry.dist.name == "dsh-model-acme"
    assert "acme" in model_provider_names()
    named_in = [
        str(path.relative_to(ROOT))
        for path in _WORKSPACE_CODE
        if "dsh_model_acme" in path.read_text(encoding="utf-8")
        or "ACME_" in path.read_text(encoding="utf-8")
    ]
    assert named_in == []


@pytest.mark.e2e
def test_a_scenario_records_scripted_through_the_plugin_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = copy_scenario(SCENARIO, tmp_path)
    for name in ("session.jsonl", "stdout.expected.jsonl"):
        (folder / name).unlink()
    # The current loop logs request/header: what the provider sent is in the recording.
    meta = folder / "snapshot.yml"
    meta.write_text(meta.read_text(encoding="utf-8").replace("loop: june", "loop: current"))
    monkeypatch.setenv("DSH_RECORD_PROVIDER", "acme")
    recorded = run_scenario(load_scenario(folder), SnapshotSettings(mode="record-scripted"))
    assert recorded.ok, recorded.failures
    log = read_log_text((folder / "session.jsonl").read_text(encoding="utf-8"), "session.jsonl")
    [config] = [e.data["header"]["config"] for e in log.events if e.type == "request/header"][:1]
    assert (config["provider"], config["model"]) == ("acme", "acme-large")
    replayed = run_scenario(load_scenario(folder), SnapshotSettings())
    assert replayed.ok, replayed.failures
    assert replayed.calls_replayed > 0

"""dsh-snapshot's public API, pinned: a change to an ``__all__`` must be deliberate."""

from __future__ import annotations

import pytest

from dsh_core.testing import assert_public_api

_PUBLIC: dict[str, list[str]] = {
    "dsh_snapshot": [
        "AgentError",
        "AllowEntry",
        "Allowances",
        "COLD_ENV",
        "CWD",
        "Check",
        "ConfinementError",
        "Difference",
        "DirtyRecordingError",
        "KeyFinding",
        "Mode",
        "Normalizer",
        "OPS",
        "Op",
        "OpRegistry",
        "SESSION_ID",
        "Scenario",
        "ScenarioAgent",
        "ScenarioError",
        "ScenarioResult",
        "Selection",
        "SnapshotMeta",
        "SnapshotSettings",
        "Step",
        "StepDriver",
        "StrictStep",
        "TurnSeen",
        "UPSTREAM_ALLOWANCES",
        "WarmAgents",
        "apply_allowances",
        "copy_workspace",
        "detect_loop_profile",
        "discover",
        "first_difference",
        "harvest",
        "load_scenario",
        "normalize_frames",
        "normalize_log_text",
        "publish_fixtures",
        "redact",
        "run",
        "run_proof",
        "run_scenario",
        "scan_file",
        "scan_folder",
        "scan_text",
        "select",
        "summary_line",
        "turn_messages",
        "write_fixtures",
    ],
    "dsh_snapshot.testing": [
        "INPUT",
        "META",
        "Sandbox",
        "copy_scenario",
        "encoded_forms",
        "fake_key",
        "full_state",
        "said",
        "session_log",
        "tool_call",
        "tree_state",
        "write",
    ],
    "dsh_snapshot.cli": [
        "main",
        "record_key",
    ],
    "dsh_snapshot.pytest_plugin": [
        "ScenarioFolder",
        "ScenarioItem",
        "ScenarioTree",
    ],
    "dsh_snapshot.schemas": [
        "SCHEMA_DIR",
        "SCHEMA_FILES",
        "render_schemas",
        "schema_problems",
        "write_schemas",
    ],
}


@pytest.mark.parametrize("name", list(_PUBLIC))
def test_public_names_are_pinned(name: str) -> None:
    assert_public_api(name, _PUBLIC[name])

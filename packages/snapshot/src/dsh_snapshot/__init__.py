"""dsh-snapshot: the snapshot tier of dsh.

Scenario folders (``snapshots/<profile>/<scenario>/`` and upstream ones) are run through the real
``dsh-acp-agent`` subprocess in a fresh temporary cwd and sessions root; the harvested session
logs and stdout frames are normalised and compared with the committed fixtures (``replay``), or
written back (``refresh``, ``record``). One engine does it (:func:`run` with a
:class:`SnapshotSettings`); a pytest plugin turns each scenario into a test item and a CLI
(``dsh-snapshot replay|refresh|record|list|proof PATH…``) runs them directly, both over it.

The names below are imported on first use (PEP 562): pytest loads this package for its
plugin in every run, and the plugin must stay cheap where ``--dsh-snapshots`` is not given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_core import Deprecated, lazy_exports

if TYPE_CHECKING:
    from dsh_core import CWD, SESSION_ID, Normalizer, normalize_frames, normalize_log_text
    from dsh_snapshot._agent import AgentError, ScenarioAgent
    from dsh_snapshot._batch import run_proof
    from dsh_snapshot._compat import (
        UPSTREAM_ALLOWANCES,
        Allowances,
        TurnSeen,
        apply_allowances,
        turn_messages,
    )
    from dsh_snapshot._confine import ConfinementError, copy_workspace
    from dsh_snapshot._diff import Difference, first_difference
    from dsh_snapshot._discover import discover
    from dsh_snapshot._engine import Selection, run, select, summary_line
    from dsh_snapshot._harvest import harvest
    from dsh_snapshot._keyscan import KeyFinding, redact, scan_file, scan_folder, scan_text
    from dsh_snapshot._outcome import write_fixtures
    from dsh_snapshot._publish import DirtyRecordingError, publish_fixtures
    from dsh_snapshot._result import ScenarioResult
    from dsh_snapshot._runner import run_scenario
    from dsh_snapshot._scenario import (
        AllowEntry,
        Scenario,
        ScenarioError,
        SnapshotMeta,
        Step,
        detect_loop_profile,
        load_scenario,
    )
    from dsh_snapshot._settings import Check, Mode, SnapshotSettings
    from dsh_snapshot._steps import OPS, Op, OpRegistry, StepDriver, StrictStep
    from dsh_snapshot._warm import COLD_ENV, WarmAgents

__all__ = [
    # scenarios
    "AllowEntry",
    "Scenario",
    "ScenarioError",
    "SnapshotMeta",
    "Step",
    "detect_loop_profile",
    "discover",
    "load_scenario",
    # ops: one registration each (model, driver, whether it prompts); every table derives
    "OPS",
    "Op",
    "OpRegistry",
    "StepDriver",
    "StrictStep",
    # the engine: one settings object, one run function (the CLI, the pytest plugin and
    # tools/compat.py are front ends over it)
    "Check",
    "Mode",
    "ScenarioResult",
    "Selection",
    "SnapshotSettings",
    "run",
    "run_proof",
    "run_scenario",
    "select",
    "summary_line",
    # the agent (warm: one fork server per worker; COLD_ENV=1: a fresh interpreter per run)
    "COLD_ENV",
    "AgentError",
    "ScenarioAgent",
    "WarmAgents",
    "harvest",
    # comparison
    "CWD",
    "SESSION_ID",
    "UPSTREAM_ALLOWANCES",
    "Allowances",
    "Difference",
    "Normalizer",
    "TurnSeen",
    "apply_allowances",
    "first_difference",
    "normalize_frames",
    "normalize_log_text",
    "turn_messages",
    # security: confinement, key scan, publishing (SECURITY.md)
    "ConfinementError",
    "DirtyRecordingError",
    "KeyFinding",
    "copy_workspace",
    "publish_fixtures",
    "redact",
    "scan_file",
    "scan_folder",
    "scan_text",
    "write_fixtures",
]

_HOMES = {
    "CWD": "dsh_core",
    "SESSION_ID": "dsh_core",
    "Normalizer": "dsh_core",
    "normalize_frames": "dsh_core",
    "normalize_log_text": "dsh_core",
    "AgentError": "dsh_snapshot._agent",
    "ScenarioAgent": "dsh_snapshot._agent",
    "run_proof": "dsh_snapshot._batch",
    "summary_line": "dsh_snapshot._engine",
    "UPSTREAM_ALLOWANCES": "dsh_snapshot._compat",
    "Allowances": "dsh_snapshot._compat",
    "TurnSeen": "dsh_snapshot._compat",
    "apply_allowances": "dsh_snapshot._compat",
    "turn_messages": "dsh_snapshot._compat",
    "ConfinementError": "dsh_snapshot._confine",
    "copy_workspace": "dsh_snapshot._confine",
    "Difference": "dsh_snapshot._diff",
    "first_difference": "dsh_snapshot._diff",
    "discover": "dsh_snapshot._discover",
    "Selection": "dsh_snapshot._engine",
    "run": "dsh_snapshot._engine",
    "select": "dsh_snapshot._engine",
    "KeyFinding": "dsh_snapshot._keyscan",
    "redact": "dsh_snapshot._keyscan",
    "scan_file": "dsh_snapshot._keyscan",
    "scan_folder": "dsh_snapshot._keyscan",
    "scan_text": "dsh_snapshot._keyscan",
    "DirtyRecordingError": "dsh_snapshot._publish",
    "publish_fixtures": "dsh_snapshot._publish",
    "ScenarioResult": "dsh_snapshot._result",
    "harvest": "dsh_snapshot._harvest",
    "run_scenario": "dsh_snapshot._runner",
    "write_fixtures": "dsh_snapshot._outcome",
    "AllowEntry": "dsh_snapshot._scenario",
    "Scenario": "dsh_snapshot._scenario",
    "ScenarioError": "dsh_snapshot._scenario",
    "SnapshotMeta": "dsh_snapshot._scenario",
    "Step": "dsh_snapshot._scenario",
    "detect_loop_profile": "dsh_snapshot._scenario",
    "load_scenario": "dsh_snapshot._scenario",
    "Check": "dsh_snapshot._settings",
    "Mode": "dsh_snapshot._settings",
    "SnapshotSettings": "dsh_snapshot._settings",
    "COLD_ENV": "dsh_snapshot._warm",
    "OPS": "dsh_snapshot._steps",
    "Op": "dsh_snapshot._steps",
    "OpRegistry": "dsh_snapshot._steps",
    "StepDriver": "dsh_snapshot._steps",
    "StrictStep": "dsh_snapshot._steps",
    "WarmAgents": "dsh_snapshot._warm",
}


__getattr__, __dir__ = lazy_exports(
    __name__,
    _HOMES,
    # a homonym of dsh_acp_agent.testing.AgentProcess, which it holds (CHANGELOG.md)
    deprecated={"AgentProcess": Deprecated("._agent", "ScenarioAgent", "0.3.0")},
)

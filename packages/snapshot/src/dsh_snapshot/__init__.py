"""dsh-snapshot: the snapshot tier of dsh.

Scenario folders (``snapshots/<profile>/<scenario>/`` and upstream ones) are run through the real
``dsh-acp-agent`` subprocess in a fresh temporary cwd and sessions root; the harvested session
logs and stdout frames are normalised and compared with the committed fixtures (``replay``), or
written back (``refresh``, ``record``). One engine does it (:func:`run` with a
:class:`SnapshotSettings`); a pytest plugin turns each scenario into a test item and a CLI
(``dsh-snapshot replay|refresh|record|list|proof PATH…``) runs them directly, both over it.
"""

from dsh_core import CWD, SESSION_ID, Normalizer, normalize_frames, normalize_log_text
from dsh_snapshot._agent import AgentError, AgentProcess
from dsh_snapshot._batch import run_proof, summary_line
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
from dsh_snapshot._engine import Selection, run, select
from dsh_snapshot._keyscan import KeyFinding, redact, scan_file, scan_folder, scan_text
from dsh_snapshot._publish import DirtyRecordingError, publish_fixtures
from dsh_snapshot._runner import ScenarioResult, harvest, run_scenario, write_fixtures
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
    "AgentProcess",
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

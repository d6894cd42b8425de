"""dsh-snapshot: the snapshot tier of dsh.

Scenario folders (``snapshots/<profile>/<scenario>/`` and upstream ones) are run through the real
``dsh-acp-agent`` subprocess in a fresh temporary cwd and sessions root; the harvested session
logs and stdout frames are normalised and compared with the committed fixtures (``replay``), or
written back (``refresh``, ``record``). A pytest plugin turns each scenario into a test item and a
CLI (``dsh-snapshot replay|refresh|record|list|proof PATH…``) runs them directly.
"""

from dsh_snapshot._agent import AgentError, AgentProcess
from dsh_snapshot._batch import run_many, run_proof, summary_line
from dsh_snapshot._compat import (
    UPSTREAM_ALLOWANCES,
    Allowances,
    TurnSeen,
    apply_allowances,
    turn_messages,
)
from dsh_snapshot._diff import Difference, first_difference
from dsh_snapshot._keyscan import KeyFinding, scan_file, scan_folder
from dsh_snapshot._normalize import (
    CWD,
    SESSION_ID,
    Normalizer,
    normalize_frames,
    normalize_log_text,
)
from dsh_snapshot._runner import (
    Check,
    Composition,
    Mode,
    RunOptions,
    ScenarioResult,
    harvest,
    run_scenario,
    write_fixtures,
)
from dsh_snapshot._scenario import (
    Scenario,
    ScenarioError,
    SnapshotMeta,
    Step,
    detect_loop_profile,
    discover,
    load_scenario,
)

__all__ = [
    "CWD",
    "SESSION_ID",
    "UPSTREAM_ALLOWANCES",
    "AgentError",
    "AgentProcess",
    "Allowances",
    "Check",
    "Composition",
    "Difference",
    "KeyFinding",
    "Mode",
    "Normalizer",
    "RunOptions",
    "Scenario",
    "ScenarioError",
    "ScenarioResult",
    "SnapshotMeta",
    "Step",
    "TurnSeen",
    "apply_allowances",
    "detect_loop_profile",
    "discover",
    "first_difference",
    "harvest",
    "load_scenario",
    "normalize_frames",
    "normalize_log_text",
    "run_many",
    "run_proof",
    "run_scenario",
    "scan_file",
    "scan_folder",
    "summary_line",
    "turn_messages",
    "write_fixtures",
]

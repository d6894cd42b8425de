"""dsh-llm-replay: keyless, deterministic replay of recorded dsh sessions.

A recorded session log holds every chunk its model calls streamed; replay derives one
script per session from it (one entry per ``stream()`` call), slices each fork child's
seeded prefix off by its header's ``seedLength``, binds live sessions to scripts (a
subagent child to the recorded child of the same parent call, others in first-call order),
streams the entries back, and checks at teardown that the run consumed
the recording exactly. ``replay.override.json`` scripts what chunks alone cannot: calls
that threw or hung.
"""

from dsh_llm_replay._client import REPLAY_REQUEST_CONFIG, ReplayModelClient
from dsh_llm_replay._drift import (
    HeaderDifference,
    HeaderStatus,
    RecordedHeaders,
    around_difference,
    first_header_difference,
    recorded_headers,
)
from dsh_llm_replay._errors import (
    NotConsumedError,
    OverrideError,
    ReplayCallError,
    ReplayError,
    ReportFormatError,
    RequestDriftError,
    ScriptExhaustedError,
    UnrecordedSessionError,
    UnterminatedGroupError,
)
from dsh_llm_replay._load import DelegatedCall, SessionScript, load_session_scripts
from dsh_llm_replay._override import (
    CHUNK_TYPES,
    Override,
    OverrideDocument,
    load_override,
    parse_override,
)
from dsh_llm_replay._provider import LIVE_PROVIDER_ENV
from dsh_llm_replay._report import (
    REPORT_VERSION,
    ReplayReport,
    ReportError,
    ReportScript,
    ReportSession,
    check_report,
)
from dsh_llm_replay._script import (
    ChunksEntry,
    HangEntry,
    ReplayEntry,
    ReplayHeader,
    ThrowEntry,
    derive_replay_script,
    parse_session_header,
    parse_session_log,
)
from dsh_llm_replay._settings import ReplaySettings

__all__ = [
    # parsing and derivation
    "ChunksEntry",
    "HangEntry",
    "ReplayEntry",
    "ReplayHeader",
    "ThrowEntry",
    "derive_replay_script",
    "parse_session_header",
    "parse_session_log",
    # overrides
    "CHUNK_TYPES",
    "Override",
    "OverrideDocument",
    "load_override",
    "parse_override",
    # scripts and the client
    "DelegatedCall",
    "ReplayModelClient",
    "ReplaySettings",
    "SessionScript",
    "load_session_scripts",
    # request drift
    "LIVE_PROVIDER_ENV",
    "REPLAY_REQUEST_CONFIG",
    "HeaderDifference",
    "HeaderStatus",
    "RecordedHeaders",
    "around_difference",
    "first_header_difference",
    "recorded_headers",
    # report
    "REPORT_VERSION",
    "ReplayReport",
    "ReportError",
    "ReportScript",
    "ReportSession",
    "check_report",
    # errors
    "NotConsumedError",
    "OverrideError",
    "ReplayCallError",
    "ReplayError",
    "ReportFormatError",
    "RequestDriftError",
    "ScriptExhaustedError",
    "UnrecordedSessionError",
    "UnterminatedGroupError",
]

"""Public test doubles and the store conformance suite for dsh backends.

``InMemorySessionStore`` is a store with no durability for unit tests of code above the
store; the conformance suite (``StoreConformance``) is what every real backend runs against
its own factory; ``run_crash_trials`` SIGKILLs a writer subprocess at random moments and
checks every acknowledged batch; ``DAMAGED_LOGS`` is a catalogue of damaged logs every
reader must refuse; ``upstream_corpus`` and ``normalized_rows`` serve tests that compare logs
with the upstream recordings; ``tool_context`` lets a test call one tool directly;
``assert_public_api`` pins a package's ``__all__``; ``ScriptedModel`` plays scripts in
process through the core script player; ``connect_attempts`` collects the addresses sockets try
to reach (a live-call guard must refuse before any).
``ModelClientConformance`` is the same for model clients (the chunk union, error codes,
cancellation, redaction, the live-call guard). The suites need pytest and are imported on
first use, so ``import dsh_core.testing`` works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh_core.testing._context import tool_context
from dsh_core.testing._corpus import (
    corpus_cache,
    corpus_unavailable,
    normalized_rows,
    upstream_corpus,
)
from dsh_core.testing._crash import CrashReport, crash_kills, run_crash_trials
from dsh_core.testing._damaged import DAMAGED_LOGS, DAMAGED_SESSION_ID, DamagedLog
from dsh_core.testing._eventgen import event_time, synthetic_turn
from dsh_core.testing._memory import InMemorySessionStore
from dsh_core.testing._processes import processes_named
from dsh_core.testing._public_api import assert_public_api
from dsh_core.testing._scripted import (
    SCRIPTED_REQUEST_CONFIG,
    ScriptedModel,
    ScriptError,
    ScriptLike,
    text_chunks,
)
from dsh_core.testing._sockets import connect_attempts

if TYPE_CHECKING:
    from dsh_core.testing._conformance import StoreConformance
    from dsh_core.testing._model_conformance import (
        ModelClientConformance,
        ScriptedClientFactory,
        chunk_union_problems,
    )

__all__ = [
    "DAMAGED_LOGS",
    "DAMAGED_SESSION_ID",
    "SCRIPTED_REQUEST_CONFIG",
    "CrashReport",
    "DamagedLog",
    "InMemorySessionStore",
    "ModelClientConformance",
    "ScriptError",
    "ScriptLike",
    "ScriptedClientFactory",
    "ScriptedModel",
    "StoreConformance",
    "assert_public_api",
    "chunk_union_problems",
    "connect_attempts",
    "corpus_cache",
    "corpus_unavailable",
    "crash_kills",
    "event_time",
    "normalized_rows",
    "processes_named",
    "run_crash_trials",
    "synthetic_turn",
    "text_chunks",
    "tool_context",
    "upstream_corpus",
]


_MODEL_SUITE = ("ModelClientConformance", "ScriptedClientFactory", "chunk_union_problems")


def __getattr__(name: str) -> Any:
    # pytest is a test dependency only: load the suites when someone asks for them
    if name == "StoreConformance":
        from dsh_core.testing._conformance import StoreConformance  # noqa: PLC0415

        return StoreConformance
    if name in _MODEL_SUITE:
        from dsh_core.testing import _model_conformance  # noqa: PLC0415

        return getattr(_model_conformance, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Typed replay errors. Each one reads as a sentence naming the script, session or file."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from dsh_core import DshError, ModelError, UnterminatedCallError
from dsh_llm_replay._drift import HeaderDifference

__all__ = [
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


class ReplayError(DshError):
    """Base class of every replay error (derivation, override, binding, consumption)."""


def settings_problems(exc: ValidationError) -> str:
    """Every problem of a settings validation error, ``field: message``, joined by ``; ``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
    )


class UnterminatedGroupError(ReplayError, UnterminatedCallError):
    """A recorded model call has chunks but no ``finish``: it threw or was cancelled.

    Such a call cannot be rebuilt from ``assistant/chunk`` events alone; the scenario has to
    script it in a ``replay.override.json``. The message and the attributes (``source``,
    ``turn``, ``step``, ``chunks``, ``cut``) are those of
    :class:`dsh_core.UnterminatedCallError`.
    """


class OverrideError(ReplayError):
    """A ``replay.override.json`` is not a valid override document.

    Attributes:
        path: the override file.
        location: JSON path of the offending value (``patches[1].at``, ``[0].chunks[2].type``),
            ``document`` for the whole file, or ``line L, column C`` for invalid JSON.
        reason: what is wrong, without the location.
    """

    def __init__(self, path: str, location: str, reason: str) -> None:
        self.path = path
        self.location = location
        self.reason = reason
        super().__init__(f"{path}: {location}: {reason}")


class ReportFormatError(ReplayError):
    """A replay report file is missing, is not JSON, or is not a replay report.

    Attributes:
        path: the report file (or ``replay report`` for an object given directly).
        field: the dotted JSON location at fault (``scripts.0.replayedCalls``), or
            ``document`` for the whole file.
        reason: what is wrong, without the location.
    """

    def __init__(self, path: str, field: str, reason: str) -> None:
        self.path = path
        self.field = field
        self.reason = reason
        super().__init__(f"{path}: {field}: {reason}")


class ReplayCallError(ReplayError, ModelError):
    """A live model call the recorded scripts cannot answer.

    It is a :class:`~dsh_core.ModelError`, so the agent ends the turn cleanly with
    ``turn/end {kind:"error"}``; the client also records it for its report.
    """

    kind = "replay-error"

    def __init__(self, message: str, *, session_id: str) -> None:
        ModelError.__init__(self, message, code=self.kind.upper().replace("-", "_"))
        self.session_id = session_id


class ScriptExhaustedError(ReplayCallError):
    """A bound session made more model calls than its script recorded."""

    kind = "script-exhausted"

    def __init__(self, session_id: str, source: str, call: int, length: int) -> None:
        super().__init__(
            f"session {session_id} (script {source}) made call {call} but its script has "
            f"{length} entries: the live agent asked the model more often than the recording "
            f"did",
            session_id=session_id,
        )
        self.source = source
        self.call = call
        self.length = length


class RequestDriftError(ReplayCallError):
    """A live request's header (model, sampling, system prompt, tools) is not the one its
    recorded call was made with: the recording is stale.

    Attributes:
        source: the script's log file.
        recorded_session: the recorded session's id.
        turn: the turn of the call.
        step: the step of the call.
        difference: the first differing field (``tools[bash].parameters...description``),
            expected (recorded) and actual (live).
    """

    kind = "request-drift"

    def __init__(
        self,
        session_id: str,
        source: str,
        recorded_session: str,
        turn: int,
        step: int,
        difference: HeaderDifference,
    ) -> None:
        super().__init__(
            f"request drift in {source} (recorded session {recorded_session}, live session "
            f"{session_id}), turn {turn}, step {step}: {difference}; the recording was made "
            f"with another request header: refresh or record the scenario to accept the new one",
            session_id=session_id,
        )
        self.source = source
        self.recorded_session = recorded_session
        self.turn = turn
        self.step = step
        self.difference = difference


class UnrecordedSessionError(ReplayCallError):
    """A new live session made a model call after every recorded script was bound."""

    kind = "unrecorded-session"

    def __init__(self, session_id: str, bindings: Sequence[tuple[str, str]]) -> None:
        bound = ", ".join(f"{source} -> {live}" for source, live in bindings) or "none"
        super().__init__(
            f"session {session_id} made a model call but all {len(bindings)} recorded scripts "
            f"are already bound: {bound}; the live run has more sessions than the recording",
            session_id=session_id,
        )
        self.bindings = tuple(bindings)


class NotConsumedError(ReplayError):
    """At teardown the recording was not used exactly: scripts unbound or calls left over.

    Attributes:
        problems: one sentence per unbound script, under-consumed session or call error.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__(
            f"the replay did not consume the recording ({len(self.problems)} problem(s)): "
            + "; ".join(self.problems)
        )

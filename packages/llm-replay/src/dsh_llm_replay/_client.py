"""The replay model client: binds live sessions to recorded scripts and streams them back."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from dsh_core import Chunk, ModelError, ModelRequest, RequestConfig, atomic_write, request_header
from dsh_llm_replay._drift import first_header_difference
from dsh_llm_replay._errors import (
    NotConsumedError,
    ReplayCallError,
    ReplayError,
    RequestDriftError,
    ScriptExhaustedError,
    UnrecordedSessionError,
)
from dsh_llm_replay._load import SessionScript, load_session_scripts
from dsh_llm_replay._ready import touch_marker
from dsh_llm_replay._script import ChunksEntry, HangEntry, ThrowEntry
from dsh_llm_replay._settings import ReplaySettings

__all__ = [
    "REPORT_VERSION",
    "ReplayModelClient",
    "ReplayReport",
    "ReportError",
    "ReportScript",
    "ReportSession",
    "check_report",
]

REPORT_VERSION = 1

REPLAY_REQUEST_CONFIG: RequestConfig = {"provider": "replay", "model": "replay"}
"""The route a :class:`ReplayModelClient` reports when it is not told the live one."""


class ReportScript(TypedDict):
    """One recorded script in the report."""

    source: str
    recordedSessionId: str
    createdAt: int
    seedLength: int
    recordedCalls: int
    boundSession: str | None
    replayedCalls: int


class ReportSession(TypedDict):
    """One live session that called the model; ``script`` is None when it was unrecorded."""

    sessionId: str
    script: str | None
    calls: int


class ReportError(TypedDict):
    """A call the scripts could not answer (``script-exhausted``/``unrecorded-session``)."""

    kind: str
    sessionId: str
    message: str


class ReplayReport(TypedDict):
    """The JSON the agent writes to ``DSH_REPLAY_REPORT`` at exit.

    ``problems`` is exactly what :meth:`ReplayModelClient.assert_consumed` would raise
    (call errors, unbound scripts, under-consumed sessions); ``ok`` is ``not problems``.
    """

    version: int
    ok: bool
    scripts: list[ReportScript]
    sessions: list[ReportSession]
    errors: list[ReportError]
    problems: list[str]


class _StrictModel(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class _ScriptModel(_StrictModel):
    source: str
    recordedSessionId: str
    createdAt: int
    seedLength: int
    recordedCalls: int
    boundSession: str | None
    replayedCalls: int


class _SessionModel(_StrictModel):
    sessionId: str
    script: str | None
    calls: int


class _ErrorModel(_StrictModel):
    kind: str
    sessionId: str
    message: str


class _ReportModel(_StrictModel):
    """Validates a report read back from disk (the TypedDicts above are for typing only)."""

    version: int
    ok: bool
    scripts: list[_ScriptModel]
    sessions: list[_SessionModel]
    errors: list[_ErrorModel]
    problems: list[str]


@dataclass(slots=True)
class _Binding:
    script: SessionScript | None
    calls: int = 0


async def _replay_chunks(chunks: tuple[Chunk, ...]) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        yield chunk


async def _replay_throw(entry: ThrowEntry) -> AsyncIterator[Chunk]:
    for chunk in entry.chunks:
        yield chunk
    raise ModelError(entry.message, code=entry.code, status=entry.status)


async def _replay_hang(entry: HangEntry) -> AsyncIterator[Chunk]:
    # A text block with a partial text, as the June cancel fixture records it.
    yield {"type": "block-start", "index": 0, "blockType": "text"}
    yield {"type": "text-delta", "index": 0, "text": "partial"}
    if entry.ready_file is not None:
        # Reaching here means the consumer asked for the next chunk, so the partial text has
        # been handled: an external driver may now cancel deterministically.
        touch_marker(entry.ready_file)
    await asyncio.Event().wait()  # only cancellation ends a hang
    raise AssertionError("unreachable: an asyncio.Event nobody sets was set")  # pragma: no cover


async def _raise(error: ReplayCallError) -> AsyncIterator[Chunk]:
    for chunk in ():  # an async generator that fails on its first step
        yield chunk
    raise error


class ReplayModelClient:
    """A :class:`dsh_core.ModelClient` that answers from recorded scripts, keylessly.

    Live session ids are fresh random values every run, so a new session binds at its first
    call. A subagent child (its request carries a :class:`dsh_core.Delegation`) binds to the
    recorded child that answered the same parent call: the recorded parent's ``tool/call``
    with that ``callId``, matched to the unclaimed child of that parent whose log begins
    with the call's prompt (calls with one prompt pair with such children in order). So
    concurrent children bind the same way whichever calls the model first. Failing that, a
    child of the parent with the same prompt; any other session claims the first unclaimed
    script (the primary first, children by ``(createdAt, id)``). Each session then advances
    its own cursor, one entry per ``stream()`` call.

    Calls the scripts cannot answer raise a :class:`ReplayCallError` (a ``ModelError``, so
    the agent ends the turn cleanly) from the stream and are recorded for
    :meth:`assert_consumed` and :meth:`report`.
    """

    def __init__(
        self,
        scripts: Sequence[SessionScript],
        *,
        report_path: Path | str | None = None,
        child_jitter_ms: int = 0,
        request_config: RequestConfig | None = None,
        check_headers: bool = True,
    ) -> None:
        """Args:
        scripts: in binding order (as :func:`load_session_scripts` returns them).
        report_path: where :meth:`aclose` writes the report (``None``: nowhere).
        child_jitter_ms: test-only: each delegated child's call first sleeps a random
            0..``child_jitter_ms`` ms, so concurrent children reach the model in any order.
        request_config: the route and sampling settings the live client would send (what
            the agent logs and replay compares); ``None``: unknown, so only the system
            prompt and tools are compared.
        check_headers: compare each request's header with the recorded one; a difference
            is a ``request-drift`` error (the call is still answered, so the run shows what
            else changed). ``refresh`` and ``record`` turn it off: they accept the new header.
        """
        self.scripts: tuple[SessionScript, ...] = tuple(scripts)
        self.report_path = None if report_path is None else Path(report_path)
        self.child_jitter_ms = child_jitter_ms
        self._bindings: dict[str, _Binding] = {}
        self._claimed: set[int] = set()
        self._answers = _answering_children(self.scripts)
        self._errors: list[ReplayCallError] = []
        self._config = request_config
        self.check_headers = check_headers
        self._drifted: set[str] = set()

    @property
    def request_config(self) -> RequestConfig:
        """The live route and sampling settings, or :data:`REPLAY_REQUEST_CONFIG`."""
        return self._config if self._config is not None else REPLAY_REQUEST_CONFIG

    @classmethod
    def from_settings(
        cls, settings: ReplaySettings | None = None, *, request_config: RequestConfig | None = None
    ) -> ReplayModelClient:
        """Load the scenario the environment names (see :class:`ReplaySettings`).

        ``request_config`` is what the live client would send (see ``__init__``).

        Raises:
            ReplayError: a setting is missing or invalid, or a log cannot be read.
            dsh_core.LogFormatError, OverrideError, UnterminatedGroupError: from loading.
        """
        if settings is None:
            try:
                settings = ReplaySettings()  # pyright: ignore[reportCallIssue]
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
                )
                raise ReplayError(f"replay settings are invalid: {problems}") from None
        scripts = load_session_scripts(
            settings.snapshot_file,
            settings.child_files,
            settings.snapshot_override,
            seed_slice=settings.seed_slice,
        )
        return cls(
            scripts,
            report_path=settings.report,
            child_jitter_ms=settings.child_jitter_ms,
            request_config=request_config,
            check_headers=settings.check_headers,
        )

    # -- ModelClient ---------------------------------------------------------------------------

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Replay the next recorded call of ``request.session_id``'s script.

        Binding and the cursor advance happen here, at call time (after the test-only
        jitter, for a child), so the order of calls, not of iteration, is what they see.
        """
        if self.child_jitter_ms and request.delegation is not None:
            return self._jittered(request)
        return self._answer(request)

    async def _jittered(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        await asyncio.sleep(random.uniform(0, self.child_jitter_ms) / 1000)
        async for chunk in self._answer(request):
            yield chunk

    def _claim(self, request: ModelRequest) -> SessionScript | None:
        delegation = request.delegation
        parent = None if delegation is None else self._bindings.get(delegation.parent_session)
        if delegation is not None and parent is not None and parent.script is not None:
            answer = self._answers.get((id(parent.script), delegation.call_id))
            if answer is not None and id(answer) not in self._claimed:
                return answer
            recorded_parent = parent.script.header.id
            for script in self.scripts:
                if (
                    id(script) not in self._claimed
                    and script.header.parent_session == recorded_parent
                    and script.prompt == delegation.prompt
                ):
                    return script
        return next((s for s in self.scripts if id(s) not in self._claimed), None)

    def _answer(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        session_id = request.session_id
        binding = self._bindings.get(session_id)
        if binding is None:
            script = self._claim(request)
            if script is not None:
                self._claimed.add(id(script))
            binding = self._bindings[session_id] = _Binding(script)
        binding.calls += 1
        script = binding.script
        error: ReplayCallError
        if script is None:
            error = UnrecordedSessionError(session_id, self._bound_pairs())
        elif binding.calls > len(script.entries):
            error = ScriptExhaustedError(
                session_id, script.source, binding.calls, len(script.entries)
            )
        else:
            if self.check_headers and session_id not in self._drifted:
                self._check_header(request, script)
            entry = script.entries[binding.calls - 1]
            if isinstance(entry, ChunksEntry):
                return _replay_chunks(entry.chunks)
            if isinstance(entry, ThrowEntry):
                return _replay_throw(entry)
            return _replay_hang(entry)
        self._errors.append(error)
        return _raise(error)

    def _check_header(self, request: ModelRequest, script: SessionScript) -> None:
        """Record (once per session) a ``request-drift`` error when the live header is not
        the recorded one; June-era and upstream-normalised recordings are not checked."""
        expected = script.request_headers.at(request.turn, request.step)
        if expected is None:
            return
        actual = dict(request_header(self.request_config, request))
        if self._config is None:  # the live route is unknown: compare prompt and tools only
            actual["config"] = expected.get("config")
        difference = first_header_difference(expected, actual)
        if difference is not None:
            self._drifted.add(request.session_id)
            self._errors.append(
                RequestDriftError(
                    request.session_id,
                    script.source,
                    script.header.id,
                    request.turn,
                    request.step,
                    difference,
                )
            )

    async def aclose(self) -> None:
        """Write the report to ``report_path`` if one was given; there is nothing to release."""
        if self.report_path is not None:
            self.write_report(self.report_path)

    # -- checks and report ---------------------------------------------------------------------

    def _bound_pairs(self) -> list[tuple[str, str]]:
        return [
            (b.script.source, live) for live, b in self._bindings.items() if b.script is not None
        ]

    @property
    def errors(self) -> tuple[ReplayCallError, ...]:
        """Every call the scripts could not answer, in call order."""
        return tuple(self._errors)

    def problems(self) -> list[str]:
        """What :meth:`assert_consumed` names: call errors, unbound scripts, short sessions."""
        problems = [str(error) for error in self._errors]
        bound = {id(b.script): live for live, b in self._bindings.items() if b.script is not None}
        for script in self.scripts:
            # A recorded session that made no model call (a bare handshake) leaves nothing to
            # consume, so it never needs a live session to bind to it.
            if id(script) not in bound and script.entries:
                problems.append(
                    f"script {script.source} (recorded session {script.header.id}, "
                    f"{len(script.entries)} calls) was never bound to a live session"
                )
        for live, binding in self._bindings.items():
            script = binding.script
            if script is not None and binding.calls < len(script.entries):
                problems.append(
                    f"session {live} (script {script.source}) made "
                    f"{binding.calls} of {len(script.entries)} recorded calls"
                )
        return problems

    def assert_consumed(self) -> None:
        """Check at teardown that the run used the recording exactly.

        Raises:
            NotConsumedError: naming every script never bound, every session that made fewer
                calls than its script recorded, and every call the scripts could not answer.
        """
        problems = self.problems()
        if problems:
            raise NotConsumedError(problems)

    def report(self) -> ReplayReport:
        """A JSON-able summary: scripts and their bindings, live sessions, errors, problems."""
        live_of = {
            id(b.script): (live, b.calls)
            for live, b in self._bindings.items()
            if b.script is not None
        }
        scripts: list[ReportScript] = []
        for script in self.scripts:
            live, calls = live_of.get(id(script), (None, 0))
            scripts.append(
                {
                    "source": script.source,
                    "recordedSessionId": script.header.id,
                    "createdAt": script.header.created_at,
                    "seedLength": script.header.seed_length,
                    "recordedCalls": len(script.entries),
                    "boundSession": live,
                    "replayedCalls": min(calls, len(script.entries)),
                }
            )
        sessions: list[ReportSession] = [
            {
                "sessionId": live,
                "script": None if b.script is None else b.script.source,
                "calls": b.calls,
            }
            for live, b in self._bindings.items()
        ]
        errors: list[ReportError] = [
            {"kind": e.kind, "sessionId": e.session_id, "message": str(e)} for e in self._errors
        ]
        problems = self.problems()
        return {
            "version": REPORT_VERSION,
            "ok": not problems,
            "scripts": scripts,
            "sessions": sessions,
            "errors": errors,
            "problems": problems,
        }

    def write_report(self, path: Path | str) -> None:
        """Write :meth:`report` as JSON, atomically (a reader never sees half a report)."""
        text = json.dumps(self.report(), indent=2, ensure_ascii=False) + "\n"
        atomic_write(path, text)


def _answering_children(
    scripts: Sequence[SessionScript],
) -> dict[tuple[int, str], SessionScript]:
    """Which recorded child answered each recorded delegating call, keyed by
    ``(id(parent script), callId)``.

    A child answers a call of its ``parentSession`` whose prompt its log begins with; calls
    that share a prompt take such children in ``(createdAt, id)`` order, as they started.
    """
    answers: dict[tuple[int, str], SessionScript] = {}
    for parent in scripts:
        children = [s for s in scripts if s.header.parent_session == parent.header.id]
        for call in parent.delegated:
            child = next((c for c in children if c.prompt == call.prompt), None)
            if child is not None:
                children.remove(child)
                answers[(id(parent), call.call_id)] = child
    return answers


def check_report(report: Path | str | dict[str, Any]) -> ReplayReport:
    """Validate a replay report (a path or the loaded dict) and fail as the client would.

    Returns:
        The report, when the replay consumed its recording exactly.

    Raises:
        ReplayError: the report is missing or not a valid report.
        NotConsumedError: the report lists problems (call errors, unbound scripts, short
            sessions), named as :meth:`ReplayModelClient.assert_consumed` names them.
    """
    if isinstance(report, dict):
        doc: Any = report
        where = "replay report"
    else:
        where = str(report)
        try:
            doc = json.loads(Path(report).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ReplayError(
                f"{where}: cannot read the replay report ({exc}); did the agent "
                f"exit before writing it?"
            ) from None
        except ValueError as exc:
            raise ReplayError(f"{where}: the replay report is not valid JSON ({exc})") from None
    try:
        parsed = _ReportModel.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(part) for part in first["loc"]) or "document"
        raise ReplayError(f"{where}: not a replay report: {loc}: {first['msg']}") from None
    if parsed.version != REPORT_VERSION:
        raise ReplayError(
            f"{where}: replay report version {parsed.version} is not {REPORT_VERSION}"
        )
    if parsed.problems:
        raise NotConsumedError(parsed.problems)
    return cast(ReplayReport, parsed.model_dump())

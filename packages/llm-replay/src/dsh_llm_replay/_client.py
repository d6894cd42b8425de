"""The replay model client: binds live sessions to recorded scripts and streams them back."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from dsh_core import Chunk, ModelError, ModelRequest
from dsh_llm_replay._errors import (
    NotConsumedError,
    ReplayCallError,
    ReplayError,
    ScriptExhaustedError,
    UnrecordedSessionError,
)
from dsh_llm_replay._load import SessionScript, load_session_scripts
from dsh_llm_replay._ready import touch_marker
from dsh_llm_replay._report import (
    REPORT_VERSION,
    ReplayReport,
    ReportError,
    ReportScript,
    ReportSession,
)
from dsh_llm_replay._script import ChunksEntry, HangEntry, ThrowEntry
from dsh_llm_replay._settings import ReplaySettings

__all__ = ["ReplayModelClient"]


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
    ) -> None:
        """Args:
        scripts: in binding order (as :func:`load_session_scripts` returns them).
        report_path: where :meth:`aclose` writes the report (``None``: nowhere).
        child_jitter_ms: test-only: each delegated child's call first sleeps a random
            0..``child_jitter_ms`` ms, so concurrent children reach the model in any order.
        """
        self.scripts: tuple[SessionScript, ...] = tuple(scripts)
        self.report_path = None if report_path is None else Path(report_path)
        self._reported = False
        self.child_jitter_ms = child_jitter_ms
        self._bindings: dict[str, _Binding] = {}
        self._claimed: set[int] = set()
        self._answers = _answering_children(self.scripts)
        self._errors: list[ReplayCallError] = []

    @classmethod
    def from_settings(cls, settings: ReplaySettings | None = None) -> ReplayModelClient:
        """Load the scenario the environment names (see :class:`ReplaySettings`).

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
        return cls(scripts, report_path=settings.report, child_jitter_ms=settings.child_jitter_ms)

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
            entry = script.entries[binding.calls - 1]
            if isinstance(entry, ChunksEntry):
                return _replay_chunks(entry.chunks)
            if isinstance(entry, ThrowEntry):
                return _replay_throw(entry)
            return _replay_hang(entry)
        self._errors.append(error)
        return _raise(error)

    async def aclose(self) -> None:
        """Write the report to ``report_path`` if one was given, once: the client owns the
        report, and a second close (or anyone else) never writes it again."""
        if self.report_path is not None and not self._reported:
            self._reported = True
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
        """What this run consumed: scripts and their bindings, live sessions, errors, problems."""
        live_of = {
            id(b.script): (live, b.calls)
            for live, b in self._bindings.items()
            if b.script is not None
        }
        scripts: list[ReportScript] = []
        for script in self.scripts:
            live, calls = live_of.get(id(script), (None, 0))
            scripts.append(
                ReportScript(
                    source=script.source,
                    recorded_session_id=script.header.id,
                    created_at=script.header.created_at,
                    seed_length=script.header.seed_length,
                    recorded_calls=len(script.entries),
                    bound_session=live,
                    replayed_calls=min(calls, len(script.entries)),
                )
            )
        sessions = [
            ReportSession(
                session_id=live,
                script=None if b.script is None else b.script.source,
                calls=b.calls,
            )
            for live, b in self._bindings.items()
        ]
        errors = [
            ReportError(kind=e.kind, session_id=e.session_id, message=str(e)) for e in self._errors
        ]
        problems = self.problems()
        return ReplayReport(
            version=REPORT_VERSION,
            ok=not problems,
            scripts=scripts,
            sessions=sessions,
            errors=errors,
            problems=problems,
        )

    def write_report(self, path: Path | str) -> None:
        """Write :meth:`report` as JSON, atomically (a reader never sees half a report)."""
        self.report().write(path)


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

"""The replay model client: binds live sessions to recorded scripts and streams them back."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from pydantic import ValidationError

from dsh_core import (
    Chunk,
    HangEntry,
    ModelRequest,
    PlayerScript,
    RequestConfig,
    ScriptEntry,
    ScriptPlayer,
    play_entry,
    request_header,
)
from dsh_llm_replay._drift import first_header_difference
from dsh_llm_replay._errors import (
    NotConsumedError,
    ReplayCallError,
    ReplayError,
    RequestDriftError,
    ScriptExhaustedError,
    UnrecordedSessionError,
    settings_problems,
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
from dsh_llm_replay._settings import ReplaySettings

__all__ = ["ReplayModelClient"]

REPLAY_REQUEST_CONFIG: RequestConfig = {"provider": "replay", "model": "replay"}
"""The route a :class:`ReplayModelClient` reports when it is not told the live one."""


def _signal_ready(entry: HangEntry) -> None:
    # Called once the consumer asked for the chunk after the partial text, so the partial text
    # has been handled: an external driver may now cancel deterministically.
    if entry.ready_file is not None:
        touch_marker(entry.ready_file)


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
        self._reported = False
        self.child_jitter_ms = child_jitter_ms
        # The core player binds and counts; these map its scripts to ours and back.
        played = [PlayerScript(s.source, s.entries, s.header.id) for s in self.scripts]
        self._player = ScriptPlayer(played)
        self._played = {id(s): p for s, p in zip(self.scripts, played, strict=True)}
        self._recorded = {id(p): s for s, p in zip(self.scripts, played, strict=True)}
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
                problems = settings_problems(exc)
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

    def _script_of(self, session_id: str) -> SessionScript | None:
        binding = self._player.bindings.get(session_id)
        return (
            None
            if binding is None or binding.script is None
            else self._recorded[id(binding.script)]
        )

    def _claim(self, request: ModelRequest) -> PlayerScript[ScriptEntry] | None:
        delegation = request.delegation
        parent = None if delegation is None else self._script_of(delegation.parent_session)
        if delegation is not None and parent is not None:
            answer = self._answers.get((id(parent), delegation.call_id))
            if answer is not None and not self._player.is_claimed(self._played[id(answer)]):
                return self._played[id(answer)]
            for script in self.scripts:
                played = self._played[id(script)]
                if (
                    not self._player.is_claimed(played)
                    and script.header.parent_session == parent.header.id
                    and script.prompt == delegation.prompt
                ):
                    return played
        return next(iter(self._player.unclaimed()), None)

    def _answer(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        session_id = request.session_id
        binding, entry = self._player.next_entry(session_id, lambda: self._claim(request))
        if entry is not None:
            script = self._script_of(session_id)
            if self.check_headers and script is not None and session_id not in self._drifted:
                self._check_header(request, script)
            return play_entry(entry, _signal_ready)
        error: ReplayCallError
        if binding.script is None:
            error = UnrecordedSessionError(session_id, self._player.bound_pairs())
        else:
            length = len(binding.script.entries)
            error = ScriptExhaustedError(session_id, binding.script.label, binding.calls, length)
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
        """Write the report to ``report_path`` if one was given, once: the client owns the
        report, and a second close (or anyone else) never writes it again."""
        if self.report_path is not None and not self._reported:
            self._reported = True
            self.write_report(self.report_path)

    # -- checks and report ---------------------------------------------------------------------

    @property
    def errors(self) -> tuple[ReplayCallError, ...]:
        """Every call the scripts could not answer, in call order."""
        return tuple(self._errors)

    def problems(self) -> list[str]:
        """What :meth:`assert_consumed` names: call errors, unbound scripts, short sessions."""
        # A recorded session that made no model call (a bare handshake) leaves nothing to
        # consume, so the player never asks a live session to bind to it.
        return [str(error) for error in self._errors] + self._player.problems()

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
        bindings = self._player.bindings
        live_of = {
            id(b.script): (live, b.calls) for live, b in bindings.items() if b.script is not None
        }
        scripts: list[ReportScript] = []
        for script in self.scripts:
            live, calls = live_of.get(id(self._played[id(script)]), (None, 0))
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
                script=None if b.script is None else b.script.label,
                calls=b.calls,
            )
            for live, b in bindings.items()
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

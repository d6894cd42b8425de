"""One script player for every scripted model: entries, derivation, binding, consumption.

A *script* is what one session's model calls answer, one *entry* per ``stream()`` call. The
entry vocabulary is the DSH chunk union plus the two outcomes chunks cannot express:

- :class:`ChunksEntry` — stream these chunks (a recorded call ends with ``finish``);
- :class:`ThrowEntry` — stream these chunks, then fail with a :class:`ModelError`;
- :class:`HangEntry` — stream a partial text, then wait until cancelled.

:func:`derive_replay_script` rebuilds a recorded session's script from its log; a
:class:`ScriptPlayer` binds live session ids to scripts and keeps each session's cursor.
The in-process test double (``dsh_core.testing.ScriptedModel``), the replay client
(``dsh_llm_replay.ReplayModelClient``) and the scripted HTTP server
(``dsh_scripted_server.ScriptedModelServer``) all play scripts through this module, so
they bind, count and complain the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dsh_core._errors import DshError
from dsh_core._events import Chunk, Event
from dsh_core._model import ModelError

__all__ = [
    "PARTIAL_TEXT",
    "ChunksEntry",
    "HangEntry",
    "PlayerBinding",
    "PlayerScript",
    "ScriptEntry",
    "ScriptPlayer",
    "ThrowEntry",
    "UnterminatedCallError",
    "derive_replay_script",
    "play_entry",
]

PARTIAL_TEXT: tuple[Chunk, ...] = (
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "partial"},
)
"""What a hang streams before it waits: a text block with a partial text, as the June cancel
fixture records it."""


@dataclass(frozen=True, slots=True)
class ChunksEntry:
    """A call that streams ``chunks`` (a recorded one ends with ``finish``) and returns."""

    chunks: tuple[Chunk, ...]


@dataclass(frozen=True, slots=True)
class ThrowEntry:
    """A call that streams ``chunks`` and then fails with ``ModelError(message, code, status)``."""

    chunks: tuple[Chunk, ...]
    message: str
    code: str | None = None
    status: int | None = None

    def error(self) -> ModelError:
        """The error this call ends with."""
        return ModelError(self.message, code=self.code, status=self.status)


@dataclass(frozen=True, slots=True)
class HangEntry:
    """A call that streams ``chunks`` (a partial text) and then waits until it is cancelled.

    Attributes:
        ready_file: for a player that signals the moment the partial text has reached the
            consumer (replay creates this marker file, so an external driver can cancel
            deterministically); ``None``: no signal.
        chunks: what is streamed before the wait.
    """

    ready_file: str | None = None
    chunks: tuple[Chunk, ...] = PARTIAL_TEXT


ScriptEntry = ChunksEntry | ThrowEntry | HangEntry
"""One ``stream()`` call of a script."""


async def play_entry(
    entry: ScriptEntry, on_hang: Callable[[HangEntry], None] | None = None
) -> AsyncIterator[Chunk]:
    """Stream one entry: its chunks, then return, raise its error, or wait for cancellation.

    Args:
        entry: the entry to play.
        on_hang: called once a hang's chunks have been consumed (the consumer asked for the
            next chunk), before the wait.

    Raises:
        ModelError: the entry is a :class:`ThrowEntry`.
    """
    for chunk in entry.chunks:
        yield chunk
    if isinstance(entry, ThrowEntry):
        raise entry.error()
    if isinstance(entry, HangEntry):
        if on_hang is not None:
            on_hang(entry)
        await asyncio.Event().wait()  # only cancellation ends a hang


# --- derivation ---------------------------------------------------------------------------------


class UnterminatedCallError(DshError):
    """A recorded model call has chunks but no ``finish``: it threw or was cancelled.

    Such a call cannot be rebuilt from ``assistant/chunk`` events alone; the scenario has to
    script it (in replay: a ``replay.override.json``).

    Attributes:
        source: the log the events came from.
        turn: the turn of the cut-off call.
        step: the step of the cut-off call.
        chunks: how many chunks the call recorded before it was cut off.
        cut: what cut it off (the next step, or the end of the log).
    """

    def __init__(self, source: str, turn: int, step: int, chunks: int, cut: str) -> None:
        self.source = source
        self.turn = turn
        self.step = step
        self.chunks = chunks
        self.cut = cut
        super().__init__(
            f"{source}: the model call in turn {turn}, step {step} recorded {chunks} chunk(s) "
            f"but no finish chunk before {cut}: the stream threw or was cancelled, which "
            f"chunks alone cannot replay; the scenario needs a replay.override.json that "
            f"scripts this call (a throw or hang entry)"
        )


def derive_replay_script(events: Iterable[Event], source: str = "<events>") -> list[ChunksEntry]:
    """One :class:`ChunksEntry` per recorded ``stream()`` call, in order.

    Only ``assistant/chunk`` events count. A call is the chunks up to and including a
    ``finish`` chunk, so retries within one step are separate entries. The chunk dicts are
    the parsed ones, not copies.

    Raises:
        UnterminatedCallError: chunks of a call are cut off by a ``(turn, step)`` change or
            by the end of the log without a ``finish`` (a call that threw or was cancelled).
    """
    entries: list[ChunksEntry] = []
    group: list[Any] = []
    turn = step = 0
    for event in events:
        if event.type != "assistant/chunk":
            continue
        data = event.data
        if not group:
            turn, step = data["turn"], data["step"]
        elif data["turn"] != turn or data["step"] != step:
            raise UnterminatedCallError(
                source,
                turn,
                step,
                len(group),
                f"turn {data['turn']}, step {data['step']} began (event seq {event.seq})",
            )
        chunk = data["chunk"]
        group.append(chunk)
        if chunk["type"] == "finish":
            entries.append(ChunksEntry(tuple(group)))
            group = []
    if group:
        raise UnterminatedCallError(source, turn, step, len(group), "the end of the log")
    return entries


# --- binding ------------------------------------------------------------------------------------

EntryT = TypeVar("EntryT")


@dataclass(frozen=True, slots=True)
class PlayerScript(Generic[EntryT]):
    """One session's script.

    Attributes:
        label: how messages name the script (a file, ``#2``, ``for <session id>``).
        entries: one per ``stream()`` call.
        recorded_session: the session id it was recorded under, when there is one.
    """

    label: str
    entries: tuple[EntryT, ...]
    recorded_session: str | None = None


@dataclass(slots=True)
class PlayerBinding(Generic[EntryT]):
    """A live session and the script it is bound to (``None``: none was left to bind).

    Attributes:
        calls: every call the session made, including calls its script could not answer.
    """

    session_id: str
    script: PlayerScript[EntryT] | None
    calls: int = 0

    @property
    def exhausted(self) -> bool:
        """Whether the last call went past the end of the script (or there is none)."""
        return self.script is None or self.calls > len(self.script.entries)


class ScriptPlayer(Generic[EntryT]):
    """Binds live session ids to scripts and hands out each session's next entry.

    A session id named in ``by_id`` plays that script. Any other session claims a script at
    its first call: the one ``claim`` picks, by default the first unclaimed in order. Each
    session then advances its own cursor, one entry per call. Not thread-safe: a threaded
    caller holds its own lock around :meth:`next_entry`.
    """

    def __init__(
        self,
        scripts: Iterable[PlayerScript[EntryT]] = (),
        *,
        by_id: Mapping[str, PlayerScript[EntryT]] | None = None,
    ) -> None:
        self.scripts: list[PlayerScript[EntryT]] = list(scripts)
        self._claimed: set[int] = set()
        self.bindings: dict[str, PlayerBinding[EntryT]] = {}
        for session_id, script in (by_id or {}).items():
            self.assign(session_id, script)

    def add(self, script: PlayerScript[EntryT]) -> None:
        """Append a script for a session that has not called yet."""
        self.scripts.append(script)

    def assign(self, session_id: str, script: PlayerScript[EntryT]) -> None:
        """Bind ``script`` to ``session_id`` (replacing its binding and its cursor)."""
        self.bindings[session_id] = PlayerBinding(session_id, script)

    def is_claimed(self, script: PlayerScript[EntryT]) -> bool:
        """Whether a session has claimed ``script`` at its first call."""
        return id(script) in self._claimed

    def unclaimed(self) -> list[PlayerScript[EntryT]]:
        """The scripts no session has claimed yet, in order."""
        return [s for s in self.scripts if id(s) not in self._claimed]

    def binding(
        self,
        session_id: str,
        claim: Callable[[], PlayerScript[EntryT] | None] | None = None,
    ) -> PlayerBinding[EntryT]:
        """The binding of ``session_id``, claiming a script when it has none yet."""
        binding = self.bindings.get(session_id)
        if binding is None:
            script = claim() if claim is not None else next(iter(self.unclaimed()), None)
            if script is not None:
                self._claimed.add(id(script))
            binding = self.bindings[session_id] = PlayerBinding(session_id, script)
        return binding

    def next_entry(
        self,
        session_id: str,
        claim: Callable[[], PlayerScript[EntryT] | None] | None = None,
    ) -> tuple[PlayerBinding[EntryT], EntryT | None]:
        """Count one call of ``session_id`` and return its entry (``None``: a miss).

        A miss is a session with no script left to bind, or past its script's end;
        :meth:`miss` words it.
        """
        binding = self.binding(session_id, claim)
        binding.calls += 1
        if binding.exhausted:
            return binding, None
        assert binding.script is not None  # not exhausted
        return binding, binding.script.entries[binding.calls - 1]

    def bound_pairs(self) -> list[tuple[str, str]]:
        """``(script label, live session id)`` of every bound session, in binding order."""
        return [(b.script.label, sid) for sid, b in self.bindings.items() if b.script is not None]

    def miss(self, binding: PlayerBinding[EntryT]) -> str:
        """The sentence for a call the scripts cannot answer (see :meth:`next_entry`)."""
        if binding.script is None:
            pairs = self.bound_pairs()
            bound = ", ".join(f"{label} -> {live}" for label, live in pairs) or "none"
            return (
                f"session {binding.session_id} made a model call but all {len(pairs)} "
                f"scripts are already bound: {bound}"
            )
        return (
            f"session {binding.session_id} (script {binding.script.label}) made call "
            f"{binding.calls} but its script has {len(binding.script.entries)} entries"
        )

    def problems(self) -> list[str]:
        """Every script never bound and every session that made fewer calls than scripted.

        A script with no entries needs no session, so it is never a problem.
        """
        bound = {id(b.script) for b in self.bindings.values() if b.script is not None}
        problems: list[str] = []
        for script in self.scripts:
            if id(script) not in bound and script.entries:
                recorded = (
                    f"recorded session {script.recorded_session}, "
                    if script.recorded_session is not None
                    else ""
                )
                problems.append(
                    f"script {script.label} ({recorded}{len(script.entries)} calls) was never "
                    f"bound to a live session"
                )
        for live, binding in self.bindings.items():
            script = binding.script
            if script is not None and binding.calls < len(script.entries):
                problems.append(
                    f"session {live} (script {script.label}) made "
                    f"{binding.calls} of {len(script.entries)} recorded calls"
                )
        return problems

    def calls_by_session(self) -> dict[str, int]:
        """How many calls each bound session made, in binding order."""
        return {sid: b.calls for sid, b in self.bindings.items()}

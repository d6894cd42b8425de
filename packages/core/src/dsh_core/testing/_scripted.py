"""``ScriptedModel``: an in-process ``ModelClient`` that plays scripts through the core player.

A public test double (like pydantic-ai's ``FunctionModel``): each session gets a script, one
entry per ``stream()`` call, in the vocabulary every dsh player shares
(:class:`~dsh_core.ChunksEntry`, :class:`~dsh_core.ThrowEntry`,
:class:`~dsh_core.HangEntry`); a bare chunk list is short for a ``ChunksEntry``. Scripts bind
to sessions the way replay does (:class:`~dsh_core.ScriptPlayer`): a session id listed in
``by_id`` gets that script; any other new session id claims the next unclaimed script of
``scripts`` at its first call. A recorded log becomes a script with
:func:`~dsh_core.derive_replay_script`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence

from dsh_core._errors import DshError
from dsh_core._events import Chunk
from dsh_core._model import ModelRequest
from dsh_core._script_player import (
    ChunksEntry,
    HangEntry,
    PlayerScript,
    ScriptEntry,
    ScriptPlayer,
    ThrowEntry,
    play_entry,
)

__all__ = ["ScriptError", "ScriptedModel", "ScriptLike"]

ScriptLike = Sequence[ScriptEntry | Sequence[Chunk]]
"""A script as tests write it: entries, where a bare chunk list stands for a ``ChunksEntry``."""


class ScriptError(DshError):
    """The scripted model was used in a way its scripts do not cover."""


def _script(label: str, raw: ScriptLike) -> PlayerScript[ScriptEntry]:
    entries: list[ScriptEntry] = []
    for item in raw:
        if isinstance(item, ChunksEntry | ThrowEntry | HangEntry):
            entries.append(item)
        else:
            entries.append(ChunksEntry(tuple(item)))
    return PlayerScript(label, tuple(entries))


class ScriptedModel:
    """Plays back scripts; records every request in :attr:`requests`.

    Args:
        scripts: scripts claimed, in order, by sessions not named in ``by_id``.
        by_id: scripts for explicit session ids.

    Attributes:
        requests: every request received, in order.
        closed: whether :meth:`aclose` was called.
    """

    def __init__(
        self, scripts: Iterable[ScriptLike] = (), *, by_id: Mapping[str, ScriptLike] | None = None
    ) -> None:
        self._player = ScriptPlayer(
            [_script(f"#{n}", script) for n, script in enumerate(scripts, 1)],
            by_id={sid: _script(f"for {sid}", script) for sid, script in (by_id or {}).items()},
        )
        self.requests: list[ModelRequest] = []
        self.closed = False

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Play the bound script's next entry (binding happens at call time).

        Raises:
            ScriptError: the session's script is exhausted, or no script is left to bind
                (from the stream).
            ModelError: the entry is a ``ThrowEntry``.
        """
        self.requests.append(request)
        binding, entry = self._player.next_entry(request.session_id)
        if entry is None:
            return _fail(ScriptError(self._player.miss(binding)))
        return play_entry(entry)

    async def aclose(self) -> None:
        self.closed = True

    def calls_by_session(self) -> dict[str, int]:
        """How many ``stream()`` calls each bound session made."""
        return self._player.calls_by_session()

    def assert_consumed(self) -> None:
        """Raise unless every script was bound and played to its end.

        Raises:
            ScriptError: naming each script never bound or only partly played.
        """
        problems = self._player.problems()
        if problems:
            raise ScriptError("; ".join(problems))


async def _fail(error: Exception) -> AsyncIterator[Chunk]:
    for chunk in ():  # an async generator that fails on its first step
        yield chunk
    raise error

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
from dsh_core._model import ModelRequest, RequestConfig
from dsh_core._script_player import (
    ChunksEntry,
    HangEntry,
    PlayerScript,
    ScriptEntry,
    ScriptPlayer,
    ThrowEntry,
    play_entry,
)

__all__ = ["SCRIPTED_REQUEST_CONFIG", "ScriptError", "ScriptLike", "ScriptedModel", "text_chunks"]

ScriptLike = Sequence[ScriptEntry | Sequence[Chunk]]
"""A script as tests write it: entries, where a bare chunk list stands for a ``ChunksEntry``."""

SCRIPTED_REQUEST_CONFIG: RequestConfig = {"provider": "scripted", "model": "scripted"}
"""What a :class:`ScriptedModel` reports as its route unless it is given another."""


def text_chunks(text: str) -> list[Chunk]:
    """One call's chunks answering ``text`` as a single text block, finishing with ``stop``."""
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


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
        request_config: what :attr:`request_config` reports (the agent logs it in
            ``request/header``).

    Attributes:
        requests: every request received, in order.
        closed: whether :meth:`aclose` was called.
    """

    def __init__(
        self,
        scripts: Iterable[ScriptLike] = (),
        *,
        by_id: Mapping[str, ScriptLike] | None = None,
        request_config: RequestConfig | None = None,
    ) -> None:
        self._request_config: RequestConfig = request_config or SCRIPTED_REQUEST_CONFIG
        self._player = ScriptPlayer(
            [_script(f"#{n}", script) for n, script in enumerate(scripts, 1)],
            by_id={sid: _script(f"for {sid}", script) for sid, script in (by_id or {}).items()},
        )
        self.requests: list[ModelRequest] = []
        self.closed = False

    @property
    def request_config(self) -> RequestConfig:
        """The route and sampling settings this model reports (not sent anywhere)."""
        return self._request_config

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

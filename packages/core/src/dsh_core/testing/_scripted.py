"""``ScriptedModel``: an in-process ``ModelClient`` that plays back scripted chunk lists.

A public test double (like pydantic-ai's ``FunctionModel``): each session gets a script, one
entry per ``stream()`` call. Scripts bind to sessions the way replay does: a session id listed
in ``by_id`` gets that script; any other new session id claims the next unclaimed script of
``scripts`` at its first call.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dsh_core._errors import DshError
from dsh_core._events import Chunk, Event
from dsh_core._model import ModelError, ModelRequest, RequestConfig

__all__ = [
    "SCRIPTED_REQUEST_CONFIG",
    "Hang",
    "Raise",
    "ScriptEntry",
    "ScriptError",
    "ScriptedModel",
    "chunk_groups",
    "text_chunks",
]

_PARTIAL: tuple[Chunk, ...] = (
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "partial"},
)


@dataclass(frozen=True)
class Raise:
    """Yield ``chunks``, then raise ``error`` (a ``ModelError``, or anything else)."""

    error: Exception
    chunks: Sequence[Chunk] = ()


@dataclass(frozen=True)
class Hang:
    """Yield ``chunks`` (by default a partial text), then wait until cancelled."""

    chunks: Sequence[Chunk] = field(default=_PARTIAL)


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


ScriptEntry = Sequence[Chunk] | ModelError | Raise | Hang
"""One ``stream()`` call: chunks to yield, a ``ModelError`` to raise at once, a ``Raise``
(chunks then an error) or a ``Hang``."""


class ScriptError(DshError):
    """The scripted model was used in a way its scripts do not cover."""


@dataclass
class _Binding:
    session_id: str
    script: Sequence[ScriptEntry]
    label: str
    calls: int = 0


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
        scripts: Iterable[Sequence[ScriptEntry]] = (),
        *,
        by_id: Mapping[str, Sequence[ScriptEntry]] | None = None,
        request_config: RequestConfig | None = None,
    ) -> None:
        self._request_config: RequestConfig = request_config or SCRIPTED_REQUEST_CONFIG
        self._unclaimed = [list(script) for script in scripts]
        self._claimed = 0
        self._bindings: dict[str, _Binding] = {
            session_id: _Binding(session_id, list(script), f"script for {session_id}")
            for session_id, script in (by_id or {}).items()
        }
        self.requests: list[ModelRequest] = []
        self.closed = False

    @property
    def request_config(self) -> RequestConfig:
        """The route and sampling settings this model reports (not sent anywhere)."""
        return self._request_config

    def _bind(self, session_id: str) -> _Binding:
        binding = self._bindings.get(session_id)
        if binding is None:
            if self._claimed >= len(self._unclaimed):
                raise ScriptError(
                    f"session {session_id} called the model but every one of the "
                    f"{len(self._unclaimed)} ordered scripts is already bound"
                )
            binding = _Binding(
                session_id, self._unclaimed[self._claimed], f"script #{self._claimed + 1}"
            )
            self._claimed += 1
            self._bindings[session_id] = binding
        return binding

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Play the bound script's next entry.

        Raises:
            ScriptError: the session's script is exhausted, or no script is left to bind.
            ModelError: the entry says so.
        """
        self.requests.append(request)
        binding = self._bind(request.session_id)
        if binding.calls >= len(binding.script):
            raise ScriptError(
                f"{binding.label} (session {binding.session_id}) has "
                f"{len(binding.script)} entries; call {binding.calls + 1} has "
                "none"
            )
        entry = binding.script[binding.calls]
        binding.calls += 1
        if isinstance(entry, ModelError):
            raise entry
        if isinstance(entry, Raise):
            for chunk in entry.chunks:
                yield chunk
            raise entry.error
        if isinstance(entry, Hang):
            for chunk in entry.chunks:
                yield chunk
            await asyncio.get_running_loop().create_future()  # only a cancellation ends this
            return
        for chunk in entry:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True

    def calls_by_session(self) -> dict[str, int]:
        """How many ``stream()`` calls each bound session made."""
        return {binding.session_id: binding.calls for binding in self._bindings.values()}

    def assert_consumed(self) -> None:
        """Raise unless every script was bound and played to its end.

        Raises:
            ScriptError: naming each script never bound or only partly played.
        """
        problems: list[str] = []
        for index in range(self._claimed, len(self._unclaimed)):
            problems.append(f"script #{index + 1} was never bound to a session")
        for binding in self._bindings.values():
            if binding.calls < len(binding.script):
                problems.append(
                    f"{binding.label} (session {binding.session_id}) played "
                    f"{binding.calls} of {len(binding.script)} entries"
                )
        if problems:
            raise ScriptError("; ".join(problems))


def chunk_groups(events: Iterable[Event]) -> list[list[Chunk]]:
    """The chunks of a log's ``assistant/chunk`` events, one list per ``(turn, step)``.

    Handy to turn a recorded log into a script: each step of a recording is one call.
    """
    groups: list[list[Chunk]] = []
    current: tuple[object, object] | None = None
    for event in events:
        if event.type != "assistant/chunk":
            continue
        key = (event.data.get("turn"), event.data.get("step"))
        if key != current:
            groups.append([])
            current = key
        groups[-1].append(event.data["chunk"])
    return groups

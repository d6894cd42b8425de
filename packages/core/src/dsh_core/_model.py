"""The model-client contract: one ``stream()`` call per agent step, chunks out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, Protocol, TypedDict, runtime_checkable

from dsh_core._errors import DshError
from dsh_core._events import Chunk, ContentBlock, TextBlock

__all__ = [
    "AssistantMessage",
    "Delegation",
    "Message",
    "ModelClient",
    "ModelError",
    "ModelRequest",
    "RequestConfig",
    "ToolMessage",
    "ToolSpec",
    "UserMessage",
]


class UserMessage(TypedDict):
    role: Literal["user"]
    content: list[TextBlock]


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: list[ContentBlock]


class ToolMessage(TypedDict):
    role: Literal["tool"]
    callId: str
    content: list[TextBlock]
    isError: bool


Message = UserMessage | AssistantMessage | ToolMessage


class ToolSpec(TypedDict):
    """What the model is told about a tool: name, description, JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


class RequestConfig(TypedDict):
    """The route and sampling settings a model client sends with every request (the
    ``config`` of upstream's ``request/header``); optional keys are omitted when unset."""

    provider: str
    model: str
    maxTokens: NotRequired[int]
    reasoningEffort: NotRequired[str]
    temperature: NotRequired[float]


@dataclass(frozen=True, slots=True)
class Delegation:
    """Which parent tool call a subagent child answers.

    Concurrent children call the model in no fixed order, so replay cannot bind them by
    first call; it binds each to the recorded child of the same parent call instead.

    Attributes:
        parent_session: the live parent session's id.
        call_id: the parent's ``tool/call`` ``callId`` that started the child.
        prompt: the delegated prompt (the child's first user message).
    """

    parent_session: str
    call_id: str
    prompt: str


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One step's request. ``session_id`` is the live session's id (replay binds by it).

    ``delegation`` is set on every request of a subagent child's delegated turn, ``None``
    for a top-level session.
    """

    session_id: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list[ToolSpec])
    system: str | None = None
    turn: int = 0
    step: int = 0
    delegation: Delegation | None = None


ALLOW_MODEL_REQUESTS_ENV = "DSH_ALLOW_MODEL_REQUESTS"
"""The environment switch against accidental live model calls: ``0`` (or ``false``, ``no``,
``off``) makes live model clients refuse every non-loopback host. Test suites (through the
``dsh_core.testing.live_guard`` pytest plugin) and replay runs set it to ``0``."""


class ModelError(DshError):
    """The model call failed. ``message``/``code`` land in ``turn/end {kind:"error"}``."""

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


@runtime_checkable
class ModelClient(Protocol):
    """A streaming model. Implementations: ``dsh_llm_deepseek``, ``dsh_llm_replay``."""

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Yield the chunk union as it arrives; ``usage`` before ``finish``, nothing after.

        Raises:
            ModelError: the call failed (before or after some chunks were yielded).
        """
        ...

    @property
    def request_config(self) -> RequestConfig:
        """What this client sends with every request besides messages, system and tools.

        The agent logs it in ``request/header``; replay compares it with the recording's.
        """
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...

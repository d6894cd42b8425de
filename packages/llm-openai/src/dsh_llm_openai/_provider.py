"""``ChatProvider``: a ``dsh.models`` plugin for one chat-completions profile (its settings
class), and ``MODEL_PROVIDER``, the generic ``openai`` entry (see ``dsh_core.plugins``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from dsh_core import RequestConfig
from dsh_llm_openai._settings import ChatSettings

if TYPE_CHECKING:
    from dsh_llm_openai._client import ChatClient

__all__ = ["MODEL_PROVIDER", "ChatProvider"]

S = TypeVar("S", bound=ChatSettings)


class ChatProvider(Generic[S]):
    """Makes a :class:`ChatClient` from a profile's settings, read from its environment
    variables (``OPENAI_*`` for the generic profile, a vendor's own for its profile).

    Args:
        name: the ``dsh.models`` entry point's name (``openai``).
        settings_model: the profile's settings class.
        client: makes the client from the settings (a profile's own ``ChatClient`` subclass);
            ``ChatClient`` when omitted.
    """

    def __init__(
        self,
        name: str,
        settings_model: type[S],
        client: Callable[[S], ChatClient[S]] | None = None,
    ) -> None:
        self.name = name
        self.settings_model = settings_model
        self._client = client
        self.secret_env_names = (settings_model.env_name("api_key"),)

    def __repr__(self) -> str:
        return f"ChatProvider({self.name!r}, {self.settings_model.__name__})"

    def create(self) -> ChatClient[S]:
        """A live client (raises ``pydantic.ValidationError`` for an invalid setting)."""
        # httpx and tenacity load only here: a replayed agent asks a provider only what it
        # would send (request_config).
        from dsh_llm_openai._client import ChatClient  # noqa: PLC0415

        settings = self.settings_model()
        return ChatClient(settings) if self._client is None else self._client(settings)

    def request_config(self) -> RequestConfig:
        """What the live client would send besides messages, system and tools (replay checks
        a recording against it; raises ``pydantic.ValidationError`` for an invalid setting)."""
        return self.settings_model().request_config()

    def preflight(self) -> str | None:
        """One ``GET /models`` (see :func:`preflight`): the one-line reason a live run would
        fail (rejected key, empty balance, unreachable endpoint, unserved model), or ``None``."""
        from dsh_llm_openai._preflight import PreflightError, preflight  # noqa: PLC0415

        try:
            asyncio.run(preflight(self.settings_model()))
        except PreflightError as exc:
            return str(exc)
        return None


MODEL_PROVIDER = ChatProvider("openai", ChatSettings)
"""What the ``dsh.models`` entry point ``openai`` names: any OpenAI-compatible endpoint,
configured by ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``OPENAI_MODEL``…"""

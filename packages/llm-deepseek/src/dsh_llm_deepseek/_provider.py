"""The ``deepseek`` entry of the ``dsh.models`` plugin group (see ``dsh_core.plugins``)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from dsh_core import RequestConfig
from dsh_llm_deepseek._settings import DeepSeekSettings

if TYPE_CHECKING:
    from dsh_llm_deepseek._client import DeepSeekClient

__all__ = ["MODEL_PROVIDER", "DeepSeekProvider"]


class DeepSeekProvider:
    """Makes a :class:`DeepSeekClient` from the ``DEEPSEEK_*`` environment variables."""

    name = "deepseek"
    settings_model = DeepSeekSettings
    secret_env_names = ("DEEPSEEK_API_KEY",)

    def create(self) -> DeepSeekClient:
        """A live client (raises ``pydantic.ValidationError`` for an invalid ``DEEPSEEK_*``)."""
        # httpx and tenacity load only here: a replayed agent asks this provider only what
        # it would send (request_config).
        from dsh_llm_deepseek._client import DeepSeekClient  # noqa: PLC0415

        return DeepSeekClient(DeepSeekSettings())

    def request_config(self) -> RequestConfig:
        """What the live client would send besides messages, system and tools (replay checks
        a recording against it; raises ``pydantic.ValidationError`` for an invalid setting)."""
        return DeepSeekSettings().request_config()

    def preflight(self) -> str | None:
        """One ``GET /models`` (see :func:`preflight`): the one-line reason a live run would
        fail (rejected key, empty balance, unreachable endpoint, unserved model), or ``None``."""
        from dsh_llm_deepseek._preflight import PreflightError, preflight  # noqa: PLC0415

        try:
            asyncio.run(preflight(DeepSeekSettings()))
        except PreflightError as exc:
            return str(exc)
        return None


MODEL_PROVIDER = DeepSeekProvider()
"""What the ``dsh.models`` entry point ``deepseek`` names."""

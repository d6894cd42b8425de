"""The ``deepseek`` entry of the ``dsh.models`` plugin group (see ``dsh_core.plugins``)."""

from __future__ import annotations

import asyncio

from dsh_llm_deepseek._client import DeepSeekClient
from dsh_llm_deepseek._preflight import PreflightError, preflight
from dsh_llm_deepseek._settings import DeepSeekSettings

__all__ = ["MODEL_PROVIDER", "DeepSeekProvider"]


class DeepSeekProvider:
    """Makes a :class:`DeepSeekClient` from the ``DEEPSEEK_*`` environment variables."""

    name = "deepseek"
    settings_model = DeepSeekSettings
    secret_env_names = ("DEEPSEEK_API_KEY",)

    def create(self) -> DeepSeekClient:
        """A live client (raises ``pydantic.ValidationError`` for an invalid ``DEEPSEEK_*``)."""
        return DeepSeekClient(DeepSeekSettings())

    def preflight(self) -> str | None:
        """One ``GET /models`` (see :func:`preflight`): the one-line reason a live run would
        fail (rejected key, empty balance, unreachable endpoint, unserved model), or ``None``."""
        try:
            asyncio.run(preflight(DeepSeekSettings()))
        except PreflightError as exc:
            return str(exc)
        return None


MODEL_PROVIDER = DeepSeekProvider()
"""What the ``dsh.models`` entry point ``deepseek`` names."""

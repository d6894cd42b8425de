"""The ``deepseek`` entry of the ``dsh.models`` plugin group (see ``dsh_core.plugins``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_llm_deepseek._settings import DeepSeekSettings
from dsh_llm_openai import ChatProvider

if TYPE_CHECKING:
    from dsh_llm_openai import ChatClient

__all__ = ["MODEL_PROVIDER"]


def _client(settings: DeepSeekSettings) -> ChatClient[DeepSeekSettings]:
    # httpx and tenacity load only here: a replayed agent asks this provider only what it
    # would send (request_config).
    from dsh_llm_deepseek._client import DeepSeekClient  # noqa: PLC0415

    return DeepSeekClient(settings)


MODEL_PROVIDER = ChatProvider("deepseek", DeepSeekSettings, _client)
"""What the ``dsh.models`` entry point ``deepseek`` names: a live ``DeepSeekClient`` on
``DEEPSEEK_*`` (``create``), what it would send (``request_config``) and one ``GET /models``
before a live run (``preflight``)."""

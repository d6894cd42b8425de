"""``DeepSeekClient``: the wire's :class:`~dsh_llm_openai.ChatClient` with DeepSeek's settings."""

from __future__ import annotations

import httpx

from dsh_llm_deepseek._settings import DeepSeekSettings
from dsh_llm_openai import ChatClient

__all__ = ["DeepSeekClient"]


class DeepSeekClient(ChatClient[DeepSeekSettings]):
    """A :class:`dsh_core.ModelClient` for DeepSeek's chat-completions API.

    The wire (request, stream, retries, failures, redaction) is ``dsh_llm_openai.ChatClient``'s;
    DeepSeek's profile (:class:`DeepSeekSettings`) adds ``thinking`` / ``reasoning_effort`` and
    sends ``reasoning_content`` back on tool-call turns.

    Args:
        settings: read from ``DEEPSEEK_*`` when omitted.
        transport: an httpx transport to use instead of the network (tests, proxies).
    """

    def __init__(
        self,
        settings: DeepSeekSettings | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            settings if settings is not None else DeepSeekSettings(), transport=transport
        )

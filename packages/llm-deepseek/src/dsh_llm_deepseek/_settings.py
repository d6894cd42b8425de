"""Settings of the DeepSeek client, read from ``DEEPSEEK_*`` environment variables."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dsh_core import RequestConfig

__all__ = [
    "DEFAULT_MODEL",
    "PROVIDER",
    "SERVED_MODELS",
    "DeepSeekSettings",
    "ReasoningEffort",
    "Thinking",
]

PROVIDER = "deepseek"
"""The ``provider`` of this client's ``request/header`` config."""

DEFAULT_MODEL = "deepseek-flash"
SERVED_MODELS = ("deepseek-flash", "deepseek-v4-pro")
"""What DeepSeek's ``GET /models`` served when last checked (2026-11-30)."""

Thinking = Literal["enabled", "disabled"]
ReasoningEffort = Literal["off", "low", "high", "max"]


class DeepSeekSettings(BaseSettings):
    """Connection, request, timeout and retry settings of :class:`DeepSeekClient`.

    Every field reads the environment variable ``DEEPSEEK_<FIELD NAME>`` (``DEEPSEEK_API_KEY``,
    ``DEEPSEEK_BASE_URL``…). No ``.env`` file is read here: loading one is the caller's decision
    (the snapshot tier does it in record mode only).

    Attributes:
        api_key: the API key; required for a call, kept as a ``SecretStr`` so that no repr,
            dump or log shows it.
        base_url: the API root; ``/chat/completions`` and ``/models`` are appended.
        model: the ``model`` field of every request.
        thinking: the deployment's thinking policy: ``enabled`` (the default, as the provider's)
            or ``disabled``, which allows only ``reasoning_effort`` ``off``.
        reasoning_effort: ``low`` / ``high`` / ``max`` send ``thinking: {type: enabled}`` and
            that ``reasoning_effort``; ``off`` sends ``thinking: {type: disabled}`` and no
            effort. ``None`` means upstream's default: ``high``, or ``off`` when ``thinking``
            is ``disabled``.
        send_session_id: send the live session id as the ``X-DSH-Session-Id`` header (the
            scripted model server routes by it; the public API does not need it).
        connect_timeout: seconds to establish the TCP/TLS connection.
        stream_idle_timeout: seconds one outstanding read may wait, from sending the request to
            the response headers and between any two reads of the body; any bytes (keep-alive
            comments too) re-arm it, as upstream's idle watchdog does.
        stream_deadline: seconds one call may take in total, or ``None`` for no bound;
            keep-alive comments never extend it.
        max_retries: retries after the first attempt (transient failures before the first
            chunk); upstream's default policy makes five.
        max_retry_after: cap, in seconds, on a server's ``Retry-After``.
        retry_base_wait: first back-off, in seconds, when the server gives no ``Retry-After``;
            doubled on each further retry.
        retry_max_wait: cap, in seconds, on that back-off.
        retry_jitter: the back-off varies by up to this fraction either way.
        max_tokens: the request's ``max_tokens`` when set.
    """

    model_config = SettingsConfigDict(env_prefix="DEEPSEEK_", extra="ignore")

    api_key: SecretStr | None = None
    base_url: str = "https://api.deepseek.com"
    model: str = DEFAULT_MODEL
    thinking: Thinking = "enabled"
    reasoning_effort: ReasoningEffort | None = None
    send_session_id: bool = False
    connect_timeout: float = Field(default=10.0, gt=0)
    stream_idle_timeout: float = Field(default=300.0, gt=0)
    stream_deadline: float | None = Field(default=None, gt=0)
    max_retries: int = Field(default=5, ge=0)
    max_retry_after: float = Field(default=60.0, ge=0)
    retry_base_wait: float = Field(default=0.5, ge=0)
    retry_max_wait: float = Field(default=10.0, ge=0)
    retry_jitter: float = Field(default=0.1, ge=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0)

    @property
    def effective_reasoning_effort(self) -> ReasoningEffort:
        """The effort a request resolves to: the setting, else ``high`` (``off`` if disabled)."""
        if self.reasoning_effort is not None:
            return self.reasoning_effort
        return "off" if self.thinking == "disabled" else "high"

    def request_config(self) -> RequestConfig:
        """What every request sends besides messages, system and tools (the agent logs it in
        ``request/header``; replay compares it): provider, model, the resolved reasoning
        effort and ``maxTokens`` when set. Nothing secret: no key, no URL."""
        config = RequestConfig(
            provider=PROVIDER, model=self.model, reasoningEffort=self.effective_reasoning_effort
        )
        if self.max_tokens is not None:
            config["maxTokens"] = self.max_tokens
        return config

    @model_validator(mode="after")
    def _thinking_allows_the_effort(self) -> Self:
        # Upstream refuses this pair at plugin load: a disabled deployment cannot think.
        if self.thinking == "disabled" and self.reasoning_effort not in (None, "off"):
            raise ValueError(
                f"reasoning_effort {self.reasoning_effort!r} needs thinking enabled; "
                "with DEEPSEEK_THINKING=disabled only 'off' (or unset) is allowed"
            )
        return self

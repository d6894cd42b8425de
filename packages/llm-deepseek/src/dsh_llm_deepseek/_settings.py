"""Settings of the DeepSeek client, read from ``DEEPSEEK_*`` environment variables."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DeepSeekSettings"]


class DeepSeekSettings(BaseSettings):
    """Connection, timeout and retry settings of :class:`DeepSeekClient`.

    Every field reads the environment variable ``DEEPSEEK_<FIELD NAME>`` (``DEEPSEEK_API_KEY``,
    ``DEEPSEEK_BASE_URL``…). No ``.env`` file is read here: loading one is the caller's decision
    (the snapshot tier does it in record mode only).

    Attributes:
        api_key: the API key; required for a call, kept as a ``SecretStr`` so that no repr,
            dump or log shows it.
        base_url: the API root; ``/chat/completions`` is appended.
        model: the ``model`` field of every request.
        connect_timeout: seconds to establish the TCP/TLS connection.
        read_timeout: seconds to wait for any single read once the response has started.
        first_byte_timeout: seconds from sending the request to receiving the response headers.
        max_retries: retries after the first attempt (transient errors before the first chunk).
        max_retry_after: cap, in seconds, on a server's ``Retry-After``.
        retry_base_wait: first back-off, in seconds, when the server gives no ``Retry-After``;
            doubled on each further retry.
        retry_max_wait: cap, in seconds, on that back-off.
        max_tokens: the request's ``max_tokens`` when set.
    """

    model_config = SettingsConfigDict(env_prefix="DEEPSEEK_", extra="ignore")

    api_key: SecretStr | None = None
    base_url: str = "https://api.deepseek.com"
    model: str = "deepseek-chat"
    connect_timeout: float = Field(default=10.0, gt=0)
    read_timeout: float = Field(default=120.0, gt=0)
    first_byte_timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    max_retry_after: float = Field(default=60.0, ge=0)
    retry_base_wait: float = Field(default=1.0, ge=0)
    retry_max_wait: float = Field(default=20.0, ge=0)
    max_tokens: int | None = Field(default=None, gt=0)

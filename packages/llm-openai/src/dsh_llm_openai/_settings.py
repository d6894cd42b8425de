"""``ChatSettings``: what any OpenAI-compatible chat-completions endpoint needs, and the hooks a
vendor profile fills in (its name, its models, its extra request fields, its wire rules)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from dsh_core import RequestConfig

__all__ = ["SESSION_HEADER", "ChatSettings"]

SESSION_HEADER = "X-DSH-Session-Id"
"""Request header carrying the live session id, sent when ``send_session_id`` is set (the
scripted model server routes by it)."""


class ChatSettings(BaseSettings):
    """Connection, request, timeout and retry settings of :class:`ChatClient`.

    Every field reads the environment variable ``<env_prefix><FIELD NAME>``; the generic
    provider's prefix is ``OPENAI_`` (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
    ``OPENAI_MODEL``…). A vendor profile subclasses this class, sets its own prefix, defaults
    and class attributes, and overrides :meth:`body_fields` / :meth:`wire_problem` where its
    API differs. No ``.env`` file is read here: loading one is the caller's decision.

    Class attributes (a profile's identity, not settings):
        provider: the ``provider`` of the ``request/header`` config.
        label: how messages name the API (``"DeepSeek"`` gives "DeepSeek API error (…)").
        served_models: the models the vendor's ``GET /models`` served when last checked
            (a scripted server serves these for the profile); empty when unknown.
        billing_url: where to top up an exhausted balance, when the vendor has one.
        reasoning_pass_back: send each assistant message's reasoning back as
            ``reasoning_content`` (DeepSeek's thinking mode needs it on tool-call turns).

    Attributes:
        api_key: the API key; required for a call, kept as a ``SecretStr`` so that no repr,
            dump or log shows it.
        base_url: the API root; ``/chat/completions`` and ``/models`` are appended.
        model: the ``model`` field of every request.
        send_session_id: send the live session id as the ``X-DSH-Session-Id`` header (the
            scripted model server routes by it; public APIs do not need it).
        connect_timeout: seconds to establish the TCP/TLS connection.
        stream_idle_timeout: seconds one outstanding read may wait, from sending the request to
            the response headers and between any two reads of the body; any bytes (keep-alive
            comments too) re-arm it.
        stream_deadline: seconds one call may take in total, or ``None`` for no bound;
            keep-alive comments never extend it.
        max_retries: retries after the first attempt (transient failures before the first
            chunk).
        max_retry_after: cap, in seconds, on a server's ``Retry-After``.
        retry_base_wait: first back-off, in seconds, when the server gives no ``Retry-After``;
            doubled on each further retry.
        retry_max_wait: cap, in seconds, on that back-off.
        retry_jitter: the back-off varies by up to this fraction either way.
        max_tokens: the request's ``max_tokens`` when set.
    """

    model_config = SettingsConfigDict(env_prefix="OPENAI_", extra="ignore")

    provider: ClassVar[str] = "openai"
    label: ClassVar[str] = "Model"
    served_models: ClassVar[tuple[str, ...]] = ()
    billing_url: ClassVar[str | None] = None
    reasoning_pass_back: ClassVar[bool] = False

    api_key: SecretStr | None = None
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
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

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable of one field (``env_name("api_key")`` →
        ``OPENAI_API_KEY``)."""
        return (str(cls.model_config.get("env_prefix") or "") + field).upper()

    def request_config(self) -> RequestConfig:
        """What every request sends besides messages, system and tools (the agent logs it in
        ``request/header``; replay compares it): provider, model and ``maxTokens`` when set.
        Nothing secret: no key, no URL."""
        config = RequestConfig(provider=self.provider, model=self.model)
        if self.max_tokens is not None:
            config["maxTokens"] = self.max_tokens
        return config

    def body_fields(self) -> dict[str, Any]:
        """Top-level fields the profile adds to every chat request body (none here)."""
        return {}

    @classmethod
    def wire_problem(cls, body: dict[str, Any]) -> str | None:
        """Why the vendor's live API would refuse this (already well-formed) chat body with
        HTTP 400, beyond an unserved model, or ``None``: the rule a scripted server's strict
        mode enforces for this profile. The generic API has none."""
        del body
        return None

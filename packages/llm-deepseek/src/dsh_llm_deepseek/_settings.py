"""DeepSeek's profile on the chat-completions wire: ``DEEPSEEK_*`` settings, its models, its
thinking and reasoning-effort fields, and the rules its live API enforces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Self, cast

from pydantic import model_validator
from pydantic_settings import SettingsConfigDict

from dsh_core import RequestConfig
from dsh_llm_openai import ChatSettings

__all__ = [
    "DEFAULT_MODEL",
    "PROVIDER",
    "SERVED_MODELS",
    "DeepSeekSettings",
    "ReasoningEffort",
    "Thinking",
    "thinking_fields",
]

PROVIDER = "deepseek"
"""The ``provider`` of this client's ``request/header`` config."""

DEFAULT_MODEL = "deepseek-flash"
SERVED_MODELS = ("deepseek-flash", "deepseek-v4-pro")
"""What DeepSeek's ``GET /models`` served when last checked (2026-11-30)."""

Thinking = Literal["enabled", "disabled"]
ReasoningEffort = Literal["off", "low", "high", "max"]

_EFFORTS = ("low", "high", "max")
_THINKING = ("enabled", "disabled")


def thinking_fields(effort: ReasoningEffort | None) -> dict[str, Any]:
    """The wire fields of one resolved effort, as upstream's ``serialize.ts`` resolves them.

    ``off`` is ours, never the wire's: it becomes ``thinking: {type: disabled}`` with no effort;
    ``low`` / ``high`` / ``max`` send ``thinking: {type: enabled}`` and ``reasoning_effort``;
    ``None`` sends neither.
    """
    if effort is None:
        return {}
    if effort == "off":
        return {"thinking": {"type": "disabled"}}
    return {"thinking": {"type": "enabled"}, "reasoning_effort": effort}


class DeepSeekSettings(ChatSettings):
    """:class:`dsh_llm_openai.ChatSettings` with DeepSeek's defaults, read from ``DEEPSEEK_*``.

    Every field reads the environment variable ``DEEPSEEK_<FIELD NAME>`` (``DEEPSEEK_API_KEY``,
    ``DEEPSEEK_BASE_URL``…); the connection, timeout and retry fields are the wire's (see
    ``ChatSettings``). No ``.env`` file is read here: loading one is the caller's decision
    (the snapshot tier does it in record mode only).

    Attributes:
        thinking: the deployment's thinking policy: ``enabled`` (the default, as the provider's)
            or ``disabled``, which allows only ``reasoning_effort`` ``off``.
        reasoning_effort: ``low`` / ``high`` / ``max`` send ``thinking: {type: enabled}`` and
            that ``reasoning_effort``; ``off`` sends ``thinking: {type: disabled}`` and no
            effort. ``None`` means upstream's default: ``high``, or ``off`` when ``thinking``
            is ``disabled``.
    """

    model_config = SettingsConfigDict(env_prefix="DEEPSEEK_", extra="ignore")

    provider: ClassVar[str] = PROVIDER
    label: ClassVar[str] = "DeepSeek"
    served_models: ClassVar[tuple[str, ...]] = SERVED_MODELS
    billing_url: ClassVar[str | None] = "https://platform.deepseek.com"
    # Thinking mode wants every tool-call turn's reasoning back (guides/thinking_mode).
    reasoning_pass_back: ClassVar[bool] = True

    base_url: str = "https://api.deepseek.com"
    model: str = DEFAULT_MODEL
    thinking: Thinking = "enabled"
    reasoning_effort: ReasoningEffort | None = None

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

    def body_fields(self) -> dict[str, Any]:
        """``thinking`` and ``reasoning_effort`` of the resolved effort."""
        return thinking_fields(self.effective_reasoning_effort)

    @classmethod
    def wire_problem(cls, body: dict[str, Any]) -> str | None:
        """Why DeepSeek's live API (checked 2026-11-30) would answer this body with HTTP 400:
        a thinking type or effort it does not know, or, in thinking mode (the default of
        today's models), an assistant message with ``tool_calls`` and no
        ``reasoning_content``."""
        thinking: Any = body.get("thinking", {"type": "enabled"})
        kind = cast(dict[str, Any], thinking).get("type") if isinstance(thinking, dict) else None
        if kind not in _THINKING:
            return f"thinking.type must be one of {', '.join(_THINKING)}, got {kind!r}"
        effort = body.get("reasoning_effort")
        if effort is not None and effort not in _EFFORTS:
            return f"reasoning_effort must be one of {', '.join(_EFFORTS)}, got {effort!r}"
        if kind == "disabled":
            return None
        messages: Sequence[Any] = body.get("messages") or []
        for index, message in enumerate(messages):
            fields = cast(dict[str, Any], message) if isinstance(message, dict) else {}
            if fields.get("role") != "assistant" or not fields.get("tool_calls"):
                continue
            if not isinstance(fields.get("reasoning_content"), str):
                return (
                    "Missing `reasoning_content` field in the assistant message at message "
                    f"index {index}. For more information, please refer to "
                    "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
                )
        return None

    @model_validator(mode="after")
    def _thinking_allows_the_effort(self) -> Self:
        # Upstream refuses this pair at plugin load: a disabled deployment cannot think.
        if self.thinking == "disabled" and self.reasoning_effort not in (None, "off"):
            raise ValueError(
                f"reasoning_effort {self.reasoning_effort!r} needs thinking enabled; "
                "with DEEPSEEK_THINKING=disabled only 'off' (or unset) is allowed"
            )
        return self

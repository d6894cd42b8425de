"""dsh-model-acme: a ``dsh.models`` provider named ``acme`` (a test package, never released).

A vendor that speaks chat completions is a ``ChatSettings`` profile and a ``ChatProvider``:
its environment prefix, defaults, models and the request fields its API adds. Nothing else in
the workspace names it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic_settings import SettingsConfigDict

from dsh_llm_openai import ChatProvider, ChatSettings

__all__ = ["MODEL_PROVIDER", "AcmeSettings"]


class AcmeSettings(ChatSettings):
    """Acme's API: ``ACME_*`` variables, two models, and a ``temperature`` it wants."""

    model_config = SettingsConfigDict(env_prefix="ACME_", extra="ignore")

    provider: ClassVar[str] = "acme"
    label: ClassVar[str] = "Acme"
    served_models: ClassVar[tuple[str, ...]] = ("acme-large", "acme-small")

    base_url: str = "https://api.acme.invalid/v1"
    model: str = "acme-large"
    temperature: float = 0.0

    def body_fields(self) -> dict[str, Any]:
        """Acme wants the sampling temperature on every request."""
        return {"temperature": self.temperature}

    @classmethod
    def wire_problem(cls, body: dict[str, Any]) -> str | None:
        """Acme's live API refuses a request without a temperature."""
        return None if "temperature" in body else "temperature is required"


MODEL_PROVIDER = ChatProvider("acme", AcmeSettings)
"""What the ``dsh.models`` entry point ``acme`` names."""

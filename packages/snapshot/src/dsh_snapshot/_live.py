"""The model provider a live recording runs against, found by its ``dsh.models`` name.

``DSH_RECORD_PROVIDER`` names it (default ``dsh_core.plugins.DEFAULT_MODEL_PROVIDER``); its
factory says which variables configure it (its settings' ``env_prefix``) and which one holds
the key (``secret_env_names``), so nothing here knows a provider by name.
"""

from __future__ import annotations

import os

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from dsh_core.plugins import DEFAULT_MODEL_PROVIDER, ModelProvider, env_prefix, model_provider
from dsh_snapshot._agent import AgentError

__all__ = [
    "LiveSettings",
    "key_name",
    "live_env",
    "live_model",
    "live_provider",
    "live_upstream",
    "preflight_problem",
    "scripted_env",
]


class LiveSettings(BaseSettings):
    """``DSH_RECORD_PROVIDER``: the ``dsh.models`` plugin a live recording uses; and what a
    foreign agent's live recording may spend through the proxy (red team 4 F11):
    ``DSH_RECORD_MAX_CALLS`` model calls per run, ``DSH_RECORD_MAX_IN_FLIGHT`` at once,
    ``max_tokens`` up to ``DSH_RECORD_MAX_TOKENS`` (``dsh_llm_proxy.RecordPolicy``)."""

    model_config = SettingsConfigDict(env_prefix="DSH_RECORD_", extra="ignore")

    provider: str = DEFAULT_MODEL_PROVIDER
    max_calls: int = Field(default=200, ge=1)
    max_in_flight: int = Field(default=4, ge=1)
    max_tokens: int = Field(default=32768, ge=1)


def live_provider() -> ModelProvider:
    """The provider ``DSH_RECORD_PROVIDER`` names.

    Raises:
        dsh_core.plugins.PluginError: it is not installed, or broken.
    """
    return model_provider(LiveSettings().provider)


def key_name(provider: ModelProvider) -> str | None:
    """The variable holding the provider's key (its first secret), or ``None``: it needs none."""
    return provider.secret_env_names[0] if provider.secret_env_names else None


def live_env(provider: ModelProvider, api_key: str | None) -> dict[str, str]:
    """What the agent of a live recording gets: the provider's name, every one of its settings
    set here (``<PREFIX>MODEL``, ``<PREFIX>BASE_URL``…) and the key."""
    prefix = env_prefix(provider)
    env = {k: v for k, v in os.environ.items() if prefix and k.startswith(prefix) and v}
    env["DSH_MODEL_CLIENT"] = provider.name
    name = key_name(provider)
    if name is not None and api_key:
        env[name] = api_key
    return env


def scripted_env(provider: ModelProvider, base_url: str) -> dict[str, str]:
    """What the agent of a ``record --scripted`` run gets: the provider's name and the
    variables of its settings model that point it at the scripted server (base URL, a key,
    ``send_session_id``, by which the server routes each request to its session).

    Raises:
        AgentError: the provider does not speak chat completions, so no scripted server can
            play it.
    """
    # record --scripted only: the server's package loads here, not with every CLI call.
    from dsh_scripted_server import client_env, resolve_profile  # noqa: PLC0415

    try:
        profile = resolve_profile(provider.name)
    except ValueError as exc:
        raise AgentError(f"record --scripted: {exc}") from None
    return {"DSH_MODEL_CLIENT": provider.name} | client_env(profile, base_url, "scripted")


def live_upstream(provider: ModelProvider) -> str:
    """The API root the provider's own client would call: its settings' ``base_url`` as the
    environment sets it (``<env_prefix>BASE_URL``), else the profile's default. A foreign
    agent's recording proxy forwards there.

    Raises:
        AgentError: the provider does not speak chat completions, or a setting is invalid.
    """
    return _live_setting(provider, "base_url")


def live_model(provider: ModelProvider) -> str:
    """The model the provider's own client would ask for (``<env_prefix>MODEL``, else the
    profile's default): the only one a foreign agent's live recording forwards.

    Raises:
        AgentError: the provider does not speak chat completions, or a setting is invalid.
    """
    return _live_setting(provider, "model")


def _live_setting(provider: ModelProvider, name: str) -> str:
    from dsh_scripted_server import resolve_profile  # noqa: PLC0415 - foreign record only

    try:
        return str(getattr(resolve_profile(provider.name)(), name))
    except ValueError as exc:  # pydantic's ValidationError is one
        raise AgentError(f"record through the proxy: {exc}") from None


def preflight_problem(provider: ModelProvider) -> str | None:
    """The provider's own check of its endpoint, when it has one (``preflight() -> str | None``):
    the one-line reason to stop before any scenario, or ``None``."""
    check = getattr(provider, "preflight", None)
    if not callable(check):
        return None
    problem = check()
    return None if problem is None else str(problem)

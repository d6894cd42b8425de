"""Which API the scripted server plays: a chat-completions profile (a ``ChatSettings`` class,
or the name of an installed ``dsh.models`` provider whose settings are one)."""

from __future__ import annotations

from typing import Any

from dsh_core.plugins import model_provider
from dsh_llm_openai import ChatSettings

__all__ = ["Profile", "client_env", "default_models", "resolve_profile"]

Profile = type[ChatSettings] | str
"""A ``ChatSettings`` subclass, or a ``dsh.models`` provider name (``"deepseek"``)."""


def resolve_profile(profile: Profile) -> type[ChatSettings]:
    """The settings class of ``profile``.

    Raises:
        dsh_core.plugins.PluginError: no installed provider has that name.
        ValueError: the provider's settings are not a chat-completions profile.
    """
    if not isinstance(profile, str):
        return profile
    settings: Any = model_provider(profile).settings_model
    if not (isinstance(settings, type) and issubclass(settings, ChatSettings)):
        raise ValueError(
            f"model provider {profile!r} does not speak chat completions: its settings are "
            f"not a dsh_llm_openai.ChatSettings, so the scripted server cannot play it"
        )
    return settings


def default_models(profile: type[ChatSettings]) -> tuple[str, ...]:
    """The models a server for ``profile`` serves unless told: the profile's
    ``served_models``, else its default ``model``."""
    if profile.served_models:
        return profile.served_models
    return (str(profile.model_fields["model"].default),)


def client_env(profile: type[ChatSettings], base_url: str, api_key: str) -> dict[str, str]:
    """The environment that points a client of ``profile`` at a scripted server: base URL,
    key and ``send_session_id`` (the server routes each request to its session by it), named
    by the profile's own prefix (``OPENAI_BASE_URL``…)."""
    return {
        profile.env_name("base_url"): base_url,
        profile.env_name("api_key"): api_key,
        profile.env_name("send_session_id"): "true",
    }

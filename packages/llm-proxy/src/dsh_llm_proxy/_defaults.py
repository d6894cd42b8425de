"""The proxy's fixed addresses and its default upstream, in a module that imports nothing at
load: the pytest plugin and the snapshot gate read them without loading the server
(starlette, httpx, uvicorn)."""

from __future__ import annotations

__all__ = ["REPORT_PATH", "upstream_defaults"]

REPORT_PATH = "/_dsh/report"
"""``GET`` it in replay mode for the consumption report (``ok``, ``problems``, bindings)."""


def upstream_defaults() -> tuple[str, str]:
    """The upstream a recording goes to unless told, and the variable holding its key: the
    default model provider's (``dsh_core.plugins.DEFAULT_MODEL_PROVIDER``) API root and key
    variable when it is installed and speaks chat completions, else the generic OpenAI API's
    (``dsh_llm_openai.ChatSettings``). The proxy names no vendor."""
    from dsh_core.plugins import DEFAULT_MODEL_PROVIDER, PluginError, model_provider  # noqa: PLC0415
    from dsh_llm_openai import ChatSettings  # noqa: PLC0415

    profile: type[ChatSettings] = ChatSettings
    try:
        settings: object = model_provider(DEFAULT_MODEL_PROVIDER).settings_model
    except PluginError:
        settings = None
    if isinstance(settings, type) and issubclass(settings, ChatSettings):
        profile = settings
    return str(profile.model_fields["base_url"].default), profile.env_name("api_key")

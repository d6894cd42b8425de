"""The ``replay`` entry of the ``dsh.models`` plugin group (see ``dsh_core.plugins``)."""

from __future__ import annotations

import os
from typing import cast

from pydantic import ValidationError

from dsh_core import RequestConfig
from dsh_core.plugins import DEFAULT_MODEL_PROVIDER, PluginError, model_provider
from dsh_llm_replay._client import ReplayModelClient
from dsh_llm_replay._errors import ReplayError, settings_problems
from dsh_llm_replay._settings import ReplaySettings

__all__ = ["LIVE_PROVIDER_ENV", "MODEL_PROVIDER", "ReplayProvider", "live_request_config"]

LIVE_PROVIDER_ENV = "DSH_REPLAY_LIVE_PROVIDER"
"""Names the ``dsh.models`` provider a replayed run stands in for (default ``deepseek``)."""


def live_request_config() -> RequestConfig | None:
    """What the live provider (``DSH_REPLAY_LIVE_PROVIDER``) would send besides messages,
    system and tools, from its own settings; ``None`` when it is not installed or cannot say
    (an optional ``request_config()`` on the provider, like ``preflight()``).

    Replay compares each request's header with the recorded one: a recording made with
    another model or sampling than the live client would now use is request drift.

    Raises:
        ReplayError: the live provider's own settings are invalid.
    """
    name = os.environ.get(LIVE_PROVIDER_ENV) or DEFAULT_MODEL_PROVIDER
    try:
        provider = model_provider(name)
    except PluginError:
        return None
    hook = getattr(provider, "request_config", None)
    if not callable(hook):
        return None
    try:
        config = cast(RequestConfig, hook())
    except ValidationError as exc:
        problems = settings_problems(exc)
        raise ReplayError(f"the live provider {name!r} has invalid settings: {problems}") from None
    return config


class ReplayProvider:
    """Makes a :class:`ReplayModelClient` from the recording the environment names."""

    name = "replay"
    settings_model = ReplaySettings
    secret_env_names: tuple[str, ...] = ()

    def create(self) -> ReplayModelClient:
        """A client replaying the recording, checking requests against what the live
        provider would send (raises ``ReplayError`` for bad settings)."""
        return ReplayModelClient.from_settings(request_config=live_request_config())


MODEL_PROVIDER = ReplayProvider()
"""What the ``dsh.models`` entry point ``replay`` names."""

"""The ``replay`` entry of the ``dsh.models`` plugin group (see ``dsh_core.plugins``)."""

from __future__ import annotations

from dsh_llm_replay._client import ReplayModelClient
from dsh_llm_replay._settings import ReplaySettings

__all__ = ["MODEL_PROVIDER", "ReplayProvider"]


class ReplayProvider:
    """Makes a :class:`ReplayModelClient` from the recording the environment names."""

    name = "replay"
    settings_model = ReplaySettings
    secret_env_names: tuple[str, ...] = ()

    def create(self) -> ReplayModelClient:
        """A client replaying the recording (raises ``ReplayError`` for bad settings)."""
        return ReplayModelClient.from_settings()


MODEL_PROVIDER = ReplayProvider()
"""What the ``dsh.models`` entry point ``replay`` names."""

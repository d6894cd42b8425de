"""The ``replay`` entry of ``dsh.models``: found by name, reading the recording the env names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core import SessionHeader, render_log
from dsh_core import plugins as registry
from dsh_core.plugins import create_model, model_provider
from dsh_llm_replay import LIVE_PROVIDER_ENV, ReplayError, ReplayModelClient, ReplaySettings
from dsh_llm_replay._provider import live_request_config


def test_the_registry_makes_a_replay_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recording = tmp_path / "session.jsonl"
    recording.write_text(render_log(SessionHeader("rec", 1), []), encoding="utf-8")
    monkeypatch.setenv("DSH_SNAPSHOT_FILE", str(recording))
    provider = model_provider("replay")
    assert provider.settings_model is ReplaySettings
    assert provider.secret_env_names == ()
    client = create_model("replay")
    assert isinstance(client, ReplayModelClient)
    client.assert_consumed()  # an empty recording: nothing to call


def test_without_a_recording_it_says_which_setting_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DSH_SNAPSHOT_FILE", raising=False)
    with pytest.raises(ReplayError, match="DSH_SNAPSHOT_FILE"):
        create_model("replay")


_LIVE_MODULE = """
from pydantic_settings import BaseSettings, SettingsConfigDict


class LiveSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FAKE_LIVE_")

    model: str = "fake-model"
    max_tokens: int | None = None


class LiveProvider:
    name = "fake-live"
    settings_model = LiveSettings
    secret_env_names = ()

    def create(self):
        raise AssertionError("replay never creates the live client")

    def request_config(self):
        settings = LiveSettings()
        config = {"provider": "fake", "model": settings.model}
        if settings.max_tokens is not None:
            config["maxTokens"] = settings.max_tokens
        return config


PROVIDER = LiveProvider()
"""


@pytest.fixture
def fake_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A distribution registering ``fake-live`` under ``dsh.models``, named as the provider a
    replayed run stands in for."""
    site = tmp_path / "site"
    dist_info = site / "fake_live-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fake-live\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(
        "[dsh.models]\nfake-live = fake_live_provider:PROVIDER\n", encoding="utf-8"
    )
    (site / "fake_live_provider.py").write_text(_LIVE_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))  # pyright: ignore[reportUnknownMemberType]
    monkeypatch.setenv(LIVE_PROVIDER_ENV, "fake-live")
    registry._entries.cache_clear()  # pyright: ignore[reportPrivateUsage]
    registry._load.cache_clear()  # pyright: ignore[reportPrivateUsage]
    yield
    registry._entries.cache_clear()  # pyright: ignore[reportPrivateUsage]
    registry._load.cache_clear()  # pyright: ignore[reportPrivateUsage]


def test_the_live_request_config_comes_from_the_live_providers_settings(
    fake_live: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LIVE_MAX_TOKENS", "64")
    assert live_request_config() == {"provider": "fake", "model": "fake-model", "maxTokens": 64}


def test_invalid_live_settings_name_the_provider_and_the_field(
    fake_live: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LIVE_MAX_TOKENS", "many")
    with pytest.raises(
        ReplayError, match=r"live provider 'fake-live' has invalid settings: max_tokens"
    ):
        live_request_config()


def test_an_uninstalled_live_provider_leaves_the_route_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(LIVE_PROVIDER_ENV, "not-installed-anywhere")
    assert live_request_config() is None

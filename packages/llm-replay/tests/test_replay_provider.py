"""The ``replay`` entry of ``dsh.models``: found by name, reading the recording the env names."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core import SessionHeader, render_log
from dsh_core.plugins import create_model, model_provider
from dsh_llm_replay import ReplayError, ReplayModelClient, ReplaySettings


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

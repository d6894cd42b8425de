"""Where a foreign agent's live recording goes: the record provider's own API root and key
variable, from its settings model (no vendor named here)."""

from __future__ import annotations

import pytest

from dsh_core.plugins import model_provider
from dsh_snapshot._agent import AgentError
from dsh_snapshot._live import key_name, live_provider, live_upstream, scripted_env


def test_the_record_providers_base_url_and_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_RECORD_PROVIDER", "openai")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    provider = live_provider()
    assert live_upstream(provider) == "https://api.openai.com/v1"
    assert key_name(provider) == "OPENAI_API_KEY"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert live_upstream(provider) == "http://127.0.0.1:9/v1"


def test_a_provider_off_the_wire_cannot_be_recorded_through_a_server() -> None:
    replay = model_provider("replay")
    with pytest.raises(AgentError, match="'replay' does not speak chat completions"):
        live_upstream(replay)
    with pytest.raises(AgentError, match=r"record --scripted: .*'replay'"):
        scripted_env(replay, "http://127.0.0.1:1")


def test_scripted_env_points_the_provider_at_the_server() -> None:
    assert scripted_env(model_provider("openai"), "http://127.0.0.1:1") == {
        "DSH_MODEL_CLIENT": "openai",
        "OPENAI_BASE_URL": "http://127.0.0.1:1",
        "OPENAI_API_KEY": "scripted",
        "OPENAI_SEND_SESSION_ID": "true",
    }

"""The profile a scripted server plays: its models, its strict rules, its client variables."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic_settings import SettingsConfigDict

from dsh_core import plugins as registry
from dsh_core.plugins import UnknownPluginError
from dsh_llm_openai import ChatSettings
from dsh_scripted_server import ScriptedModelServer, client_env, resolve_profile


class _Initech(ChatSettings):
    """A made-up vendor: its own prefix and models, and one rule of its own."""

    model_config = SettingsConfigDict(env_prefix="INITECH_", extra="ignore")
    provider: ClassVar[str] = "initech"
    served_models: ClassVar[tuple[str, ...]] = ("initech-1", "initech-2")

    @classmethod
    def wire_problem(cls, body: dict[str, Any]) -> str | None:
        return None if body.get("temperature") is None else "initech takes no temperature"


def _post(base_url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer k"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, {}
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _models(base_url: str) -> dict[str, Any]:
    request = urllib.request.Request(base_url + "/models", headers={"Authorization": "Bearer k"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_the_generic_profile_serves_its_default_model() -> None:
    with ScriptedModelServer() as server:
        listed = _models(server.base_url)
    assert server.profile is ChatSettings
    assert [m["id"] for m in listed["data"]] == [ChatSettings().model]
    assert {m["owned_by"] for m in listed["data"]} == {"openai"}


def test_a_profile_brings_its_models_and_its_rules() -> None:
    with ScriptedModelServer(profile=_Initech, strict=True, api_key="k") as server:
        assert [m["id"] for m in _models(server.base_url)["data"]] == ["initech-1", "initech-2"]
        user = [{"role": "user", "content": "hi"}]
        status, error = _post(
            server.base_url, {"model": "initech-1", "messages": user, "temperature": 1}
        )
        assert (status, error["error"]["message"]) == (400, "initech takes no temperature")
        status, error = _post(server.base_url, {"model": "gpt-4o-mini", "messages": user})
        assert status == 400
        assert "model names are initech-1 or initech-2" in error["error"]["message"]
    # Refused requests consume no script response and are recorded.
    chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert [r.status for r in chats] == [400, 400]


def test_models_given_win_over_the_profiles() -> None:
    assert ScriptedModelServer(profile=_Initech, models=["x"]).models == ("x",)


def test_a_profile_by_provider_name() -> None:
    assert resolve_profile("openai") is ChatSettings
    with pytest.raises(UnknownPluginError, match="no-such-provider"):
        ScriptedModelServer(profile="no-such-provider")


_NOT_CHAT_MODULE = """
from pydantic_settings import BaseSettings, SettingsConfigDict


class NotChatSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NOT_CHAT_")
    model: str = "m"


class Provider:
    name = "not-chat"
    settings_model = NotChatSettings
    secret_env_names = ()

    def create(self):
        raise NotImplementedError("never created: the profile lookup only reads the settings")


PROVIDER = Provider()
"""


@pytest.fixture
def not_chat_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An installed ``dsh.models`` provider whose settings are not a ChatSettings (as the
    replay provider's are not): a real distribution on ``sys.path``, read by entry point."""
    site = tmp_path / "site"
    dist_info = site / "not_chat-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: not-chat\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(
        "[dsh.models]\nnot-chat = not_chat_provider:PROVIDER\n", encoding="utf-8"
    )
    (site / "not_chat_provider.py").write_text(_NOT_CHAT_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))  # pyright: ignore[reportUnknownMemberType]
    registry._entries.cache_clear()  # pyright: ignore[reportPrivateUsage]
    registry._load.cache_clear()  # pyright: ignore[reportPrivateUsage]
    yield
    registry._entries.cache_clear()  # pyright: ignore[reportPrivateUsage]
    registry._load.cache_clear()  # pyright: ignore[reportPrivateUsage]


@pytest.mark.usefixtures("not_chat_provider")
def test_a_provider_that_is_not_on_the_wire_is_refused() -> None:
    # A provider with settings that are not chat-completions settings (the replay
    # provider is one): the scripted server cannot play it and says so.
    with pytest.raises(ValueError, match="'not-chat' does not speak chat completions"):
        resolve_profile("not-chat")


def test_client_env_names_the_profiles_variables() -> None:
    assert client_env(_Initech, "http://127.0.0.1:1", "k") == {
        "INITECH_BASE_URL": "http://127.0.0.1:1",
        "INITECH_API_KEY": "k",
        "INITECH_SEND_SESSION_ID": "true",
    }
    with ScriptedModelServer(api_key="the-key") as server:
        env = server.client_env()
    assert env["OPENAI_API_KEY"] == "the-key"
    with ScriptedModelServer() as server:
        assert server.client_env()["OPENAI_API_KEY"] == "scripted"
        assert server.client_env("mine")["OPENAI_BASE_URL"] == server.base_url


def test_the_cli_refuses_an_unknown_profile(tmp_path: Any) -> None:
    script = tmp_path / "s.json"
    script.write_text('{"sessions": []}')
    code = "import sys; from dsh_scripted_server import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", code, "--script", str(script), "--profile", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "dsh-scripted-model-server: --profile:" in done.stderr
    assert "nope" in done.stderr

"""A provider's own client, made by its ``dsh.models`` plugin and pointed at a scripted server:
the hook-up of ``dsh_core.testing.ModelClientConformance`` for a chat-completions provider."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Generator, Mapping, Sequence

from dsh_core import ModelClient, ScriptEntry
from dsh_core.plugins import create_model
from dsh_scripted_server._profile import resolve_profile
from dsh_scripted_server._server import ScriptedModelServer

__all__ = ["REMOTE_BASE_URL", "provider_client", "remote_provider_client"]

REMOTE_BASE_URL = "http://192.0.2.1:9"
"""A non-loopback address (TEST-NET-1, RFC 5737: never routed), for the live-call guard."""


@contextlib.contextmanager
def _environ(values: Mapping[str, str]) -> Generator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _create(provider: str, env: Mapping[str, str]) -> ModelClient:
    # The provider reads its settings when it makes the client: the variables are needed
    # for that moment only, and the caller's environment is as it was afterwards.
    with _environ(env):
        return create_model(provider)


@contextlib.contextmanager
def provider_client(
    provider: str, scripts: Sequence[Sequence[ScriptEntry]], *, api_key: str | None = None
) -> Generator[ModelClient]:
    """A client made by the ``dsh.models`` plugin ``provider`` (``create()``, from its own
    environment variables), pointed at a scripted server that plays ``provider``'s profile
    and ``scripts`` (one per session, bound in order of first calls), with no retries.

    Args:
        provider: an installed provider whose settings are a ``ChatSettings`` profile.
        scripts: ``dsh_core`` script entries, one list per session.
        api_key: the key the server requires and the client sends; a fresh one when omitted
            (``client.settings.api_key`` holds it).

    Raises:
        ValueError: the provider does not speak chat completions.
    """
    profile = resolve_profile(provider)
    key = api_key if api_key is not None else "scripted-" + secrets.token_hex(12)
    with ScriptedModelServer(scripts, profile=profile, api_key=key) as server:
        env = server.client_env() | {profile.env_name("max_retries"): "0"}
        yield _create(provider, env)


def remote_provider_client(provider: str) -> ModelClient:
    """A client made by ``provider`` for a non-loopback host (:data:`REMOTE_BASE_URL`), with
    a key: what the live-call guard must refuse while live calls are off.

    Raises:
        ValueError: the provider does not speak chat completions.
    """
    profile = resolve_profile(provider)
    env = {
        profile.env_name("base_url"): REMOTE_BASE_URL,
        profile.env_name("api_key"): "remote-" + secrets.token_hex(8),
        profile.env_name("max_retries"): "0",
        profile.env_name("connect_timeout"): "5",
    }
    return _create(provider, env)

"""``preflight`` on DeepSeek's profile: its models, its variables and its billing page in the
one line that says what to do. The wire's rules (retries, redaction, bounded lines, what is no
model list) are ``dsh-llm-openai``'s ``test_wire_preflight``."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from dsh_llm_deepseek import DeepSeekSettings, PreflightError, ServedModels, preflight
from dsh_scripted_server import Fault, ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., DeepSeekSettings]


async def test_a_served_model_passes(
    make_settings: SettingsFactory, server: ScriptedModelServer
) -> None:
    served = await preflight(make_settings(server.base_url, model="deepseek-v4-pro"))
    assert served == ServedModels(
        base_url=server.base_url,
        model="deepseek-v4-pro",
        names=("deepseek-flash", "deepseek-v4-pro"),
    )


@pytest.mark.parametrize(
    ("server_options", "model", "problem", "says"),
    [
        (
            {"models_fault": Fault.status(402, message="Insufficient Balance")},
            "deepseek-flash",
            "balance",
            "the DeepSeek account's balance is exhausted (HTTP 402: Insufficient Balance): "
            "top it up at https://platform.deepseek.com",
        ),
        (
            {},
            "deepseek-chat",
            "model",
            "does not serve model 'deepseek-chat': set DEEPSEEK_MODEL to one of: "
            "deepseek-flash, deepseek-v4-pro",
        ),
    ],
)
async def test_a_problem_names_deepseeks_models_variables_and_billing(
    server_options: dict[str, object],
    model: str,
    problem: str,
    says: str,
    make_settings: SettingsFactory,
) -> None:
    # The contract server in strict mode answers as DeepSeek's live API does.
    options: dict[str, Any] = {"strict": True, "profile": DeepSeekSettings, **server_options}
    with ScriptedModelServer(**options) as srv, pytest.raises(PreflightError) as info:
        await preflight(make_settings(srv.base_url, model=model))
    assert info.value.problem == problem
    assert says in str(info.value)


async def test_the_variables_to_fix_are_deepseeks(make_settings: SettingsFactory) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    with pytest.raises(PreflightError) as unreachable:
        await preflight(make_settings(f"http://127.0.0.1:{closed}"))
    assert "check DEEPSEEK_BASE_URL and the network" in str(unreachable.value)
    with pytest.raises(PreflightError) as keyless:
        await preflight(make_settings("http://127.0.0.1:9", api_key=None))
    assert "no DeepSeek API key: set DEEPSEEK_API_KEY" in str(keyless.value)

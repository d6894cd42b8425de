"""The declared public API of dsh-llm-deepseek, pinned."""

from __future__ import annotations

import dsh_llm_deepseek
from dsh_core import DshError
from dsh_core.testing import assert_public_api
from dsh_llm_openai import ChatSettings


def test_public_names() -> None:
    assert_public_api(
        "dsh_llm_deepseek",
        [
            "ALLOW_MODEL_REQUESTS",
            "ALLOW_MODEL_REQUESTS_ENV",
            "DEFAULT_MODEL",
            "DeepSeekClient",
            "DeepSeekSettings",
            "ModelRequestsDisabledError",
            "PROVIDER",
            "PreflightError",
            "ReasoningEffort",
            "SERVED_MODELS",
            "SESSION_HEADER",
            "ServedModels",
            "Thinking",
            "model_requests_allowed",
            "preflight",
        ],
    )
    assert issubclass(dsh_llm_deepseek.PreflightError, DshError)
    assert issubclass(dsh_llm_deepseek.DeepSeekSettings, ChatSettings)


def test_the_testing_module_is_the_scripted_server_playing_deepseek() -> None:
    # Deprecated alias (removal in 0.3.0): the same names as before, one server class that
    # plays DeepSeek's profile unless told otherwise.
    assert_public_api(
        "dsh_llm_deepseek.testing",
        [
            "ChunkEncoder",
            "Fault",
            "Pause",
            "RecordedRequest",
            "Response",
            "Router",
            "ScriptDocument",
            "ScriptError",
            "ScriptItem",
            "ScriptLibrary",
            "ScriptedModelServer",
            "load_script_file",
            "main",
            "parse_script_document",
            "validate_script",
        ],
    )
    server = dsh_llm_deepseek.testing.ScriptedModelServer()
    assert server.profile is dsh_llm_deepseek.DeepSeekSettings
    assert server.models == dsh_llm_deepseek.SERVED_MODELS


def test_the_settings_load_without_the_http_client() -> None:
    # A replayed agent reads DeepSeekSettings for its request header; httpx is for live calls.
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = (
        "import sys, dsh_llm_deepseek as d; d.DeepSeekSettings(); "
        "print('httpx' in sys.modules, d.DeepSeekClient.__name__, 'httpx' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "DeepSeekClient", "True"]

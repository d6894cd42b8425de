"""The declared public API of dsh-llm-deepseek, pinned."""

from __future__ import annotations

import dsh_llm_deepseek
import dsh_llm_deepseek.testing
from dsh_core import DshError


def test_public_names() -> None:
    assert sorted(dsh_llm_deepseek.__all__) == [
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
    ]
    assert issubclass(dsh_llm_deepseek.PreflightError, DshError)
    assert sorted(dsh_llm_deepseek.testing.__all__) == [
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
    ]
    for module in (dsh_llm_deepseek, dsh_llm_deepseek.testing):
        for name in module.__all__:
            assert getattr(module, name) is not None, name


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

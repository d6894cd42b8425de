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

"""The declared public API of dsh-llm-openai, pinned."""

from __future__ import annotations

import subprocess
import sys

import dsh_llm_openai
from dsh_core import DshError, ModelError
from dsh_core.testing import assert_public_api


def test_public_names() -> None:
    assert_public_api(
        "dsh_llm_openai",
        [
            "ALLOW_MODEL_REQUESTS",
            "ALLOW_MODEL_REQUESTS_ENV",
            "ChatClient",
            "ChatProvider",
            "ChatSettings",
            "ChunkEncoder",
            "MODEL_PROVIDER",
            "ModelRequestsDisabledError",
            "PreflightError",
            "REDACTED",
            "Redactor",
            "SESSION_HEADER",
            "ServedModels",
            "model_requests_allowed",
            "preflight",
        ],
    )
    assert_public_api(
        "dsh_llm_openai.testing",
        ["FinishKind", "SHORT_WAITS", "TEST_KEY", "settings_factory", "text_response"],
    )
    assert issubclass(dsh_llm_openai.PreflightError, DshError)
    assert issubclass(dsh_llm_openai.ModelRequestsDisabledError, ModelError)


def test_the_settings_and_provider_load_without_the_http_client() -> None:
    # A replayed agent asks a provider what it would send; httpx is for live calls only.
    code = (
        "import sys, dsh_llm_openai as w; w.MODEL_PROVIDER.request_config(); "
        "print('httpx' in sys.modules, w.ChatClient.__name__, 'httpx' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "ChatClient", "True"]

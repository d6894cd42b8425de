"""The declared public API of dsh-scripted-server, pinned."""

from __future__ import annotations

import subprocess
import sys

import dsh_llm_openai
import dsh_scripted_server
from dsh_core import DshError
from dsh_core.testing import assert_public_api


def test_public_names() -> None:
    assert_public_api(
        "dsh_scripted_server",
        [
            "ChunkEncoder",
            "Fault",
            "Pause",
            "Profile",
            "REMOTE_BASE_URL",
            "RecordedRequest",
            "Response",
            "Router",
            "ScriptDocument",
            "ScriptError",
            "ScriptItem",
            "ScriptLibrary",
            "ScriptedModelServer",
            "client_env",
            "load_script_file",
            "main",
            "parse_script_document",
            "provider_client",
            "remote_provider_client",
            "resolve_profile",
            "validate_script",
        ],
    )
    assert issubclass(dsh_scripted_server.ScriptError, DshError)
    # The encoder is the wire's, not a copy.
    assert dsh_scripted_server.ChunkEncoder is dsh_llm_openai.ChunkEncoder


def test_the_server_does_not_import_pytest() -> None:
    code = "import sys, dsh_scripted_server; print('pytest' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"

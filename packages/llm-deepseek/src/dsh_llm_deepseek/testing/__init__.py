"""Test doubles for code that talks to a DeepSeek / OpenAI-compatible model API.

``ScriptedModelServer`` is a real HTTP server on 127.0.0.1 that answers
``POST /chat/completions`` with scripted server-sent events, per session (routed by the
``X-DSH-Session-Id`` header, or by content through a ``ScriptLibrary`` of scenario folders),
with scripted faults (``Fault``) and pauses (``Pause``), and serves ``GET /models``. Scripts
use the entry vocabulary of ``dsh_core``'s script player (``ChunksEntry``, ``ThrowEntry``,
``HangEntry``), which binds sessions to scripts here as in every other dsh player. A
``DeepSeekClient`` pointed at it (with ``send_session_id``, unless a library routes) yields
exactly the scripted chunks. Its strict mode behaves as the live API does today. ``main`` is
the console script ``dsh-scripted-model-server``. This module does not import pytest.
"""

from dsh_llm_deepseek.testing._cli import main
from dsh_llm_deepseek.testing._encode import ChunkEncoder
from dsh_llm_deepseek.testing._library import ScriptLibrary
from dsh_llm_deepseek.testing._script import (
    Fault,
    Pause,
    Response,
    ScriptDocument,
    ScriptError,
    ScriptItem,
    load_script_file,
    parse_script_document,
    validate_script,
)
from dsh_llm_deepseek.testing._server import RecordedRequest, Router, ScriptedModelServer

__all__ = [
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

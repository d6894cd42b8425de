"""dsh-scripted-server: a scripted OpenAI-compatible model server, for tests and recordings.

``ScriptedModelServer`` is a real HTTP server on 127.0.0.1 (as httpx's ``MockTransport`` is
a first-class test double, this one is a first-class package) that answers
``POST /chat/completions`` with scripted server-sent events, per session (routed by the
``X-DSH-Session-Id`` header, or by content through a ``ScriptLibrary`` of scenario folders),
with scripted faults (``Fault``) and pauses (``Pause``), and serves ``GET /models``. It plays
one profile of the chat-completions wire (``dsh_llm_openai.ChatSettings`` or a subclass, or a
``dsh.models`` provider by name): the models it serves and, in strict mode, the rules that
profile's live API enforces. ``client_env`` gives the variables that point the profile's
client at it. Scripts use the entry vocabulary of ``dsh_core``'s script player
(``ChunksEntry``, ``ThrowEntry``, ``HangEntry``), which binds sessions to scripts here as in
every other dsh player. ``main`` is the console script ``dsh-scripted-model-server``. This
package does not import pytest.
"""

from dsh_llm_openai import ChunkEncoder
from dsh_scripted_server._cli import main
from dsh_scripted_server._clients import REMOTE_BASE_URL, provider_client, remote_provider_client
from dsh_scripted_server._library import ScriptLibrary
from dsh_scripted_server._profile import Profile, client_env, resolve_profile
from dsh_scripted_server._script import (
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
from dsh_scripted_server._server import RecordedRequest, Router, ScriptedModelServer

__all__ = [
    # the server
    "RecordedRequest",
    "Router",
    "ScriptedModelServer",
    "main",
    # the API it plays, and a provider's own client pointed at it
    "Profile",
    "client_env",
    "resolve_profile",
    "REMOTE_BASE_URL",
    "provider_client",
    "remote_provider_client",
    # scripts
    "Fault",
    "Pause",
    "Response",
    "ScriptDocument",
    "ScriptError",
    "ScriptItem",
    "ScriptLibrary",
    "load_script_file",
    "parse_script_document",
    "validate_script",
    # re-exported from dsh_llm_openai (the wire's encoder, which the server uses)
    "ChunkEncoder",
]

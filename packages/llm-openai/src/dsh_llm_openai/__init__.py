"""dsh-llm-openai: the OpenAI-compatible chat-completions wire as a dsh ``ModelClient``.

``ChatClient`` maps each step's :class:`dsh_core.ModelRequest` to a streaming
``POST /chat/completions`` and the server-sent events back to dsh chunks, with retries before
the first chunk, an idle watchdog and keys redacted from every provider message. It is
vendor-free: a :class:`ChatSettings` subclass is a *profile* (DeepSeek's is
``dsh_llm_deepseek.DeepSeekSettings``) naming its environment prefix, its models and the
request fields its API adds. ``ChatSettings`` itself reads ``OPENAI_*`` and serves any endpoint
that speaks chat completions (vLLM, llama.cpp's server, Ollama's OpenAI endpoint, hosted
APIs); the ``dsh.models`` entry point ``openai`` makes such a client. ``preflight`` checks key,
balance, endpoint and model with one ``GET /models`` before a live run; ``ChunkEncoder`` is
the inverse mapping (dsh chunks → stream events) for servers and proxies.

``ALLOW_MODEL_REQUESTS`` is the switch against accidental live calls (as in pydantic-ai): set
it to ``False`` (or ``DSH_ALLOW_MODEL_REQUESTS=0`` in the environment) and every client and
``preflight`` refuse, before connecting, any host but loopback. A profile package's own
``ALLOW_MODEL_REQUESTS`` counts too, for its clients.
"""

from typing import TYPE_CHECKING

from dsh_core import lazy_exports
from dsh_llm_openai._encode import ChunkEncoder
from dsh_llm_openai._guard import (
    ALLOW_MODEL_REQUESTS_ENV,
    ModelRequestsDisabledError,
    model_requests_allowed,
)
from dsh_llm_openai._provider import MODEL_PROVIDER, ChatProvider
from dsh_llm_openai._redact import REDACTED, Redactor
from dsh_llm_openai._settings import SESSION_HEADER, ChatSettings

ALLOW_MODEL_REQUESTS = True
"""Whether a client may reach a non-loopback host; ``False`` in tests (see above)."""

if TYPE_CHECKING:
    from dsh_llm_openai._client import ChatClient
    from dsh_llm_openai._preflight import PreflightError, ServedModels, preflight

__all__ = [
    # client and settings (a profile subclasses ChatSettings)
    "SESSION_HEADER",
    "ChatClient",
    "ChatSettings",
    # the dsh.models plugin
    "MODEL_PROVIDER",
    "ChatProvider",
    # the switch against live calls
    "ALLOW_MODEL_REQUESTS",
    "ALLOW_MODEL_REQUESTS_ENV",
    "ModelRequestsDisabledError",
    "model_requests_allowed",
    # preflight
    "PreflightError",
    "ServedModels",
    "preflight",
    # the wire's other direction, and secrets
    "ChunkEncoder",
    "REDACTED",
    "Redactor",
]

# The client and preflight import httpx and tenacity (~0.25 s); a replayed agent needs only
# the settings (what it would send), so those load on first use.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ChatClient": "._client",
        "PreflightError": "._preflight",
        "ServedModels": "._preflight",
        "preflight": "._preflight",
    },
)

"""dsh-llm-deepseek: DeepSeek's OpenAI-compatible streaming chat API as a dsh ``ModelClient``.

``DeepSeekClient`` maps each step's :class:`dsh_core.ModelRequest` to a streaming
``POST /chat/completions`` and the server-sent events back to dsh chunks; ``DeepSeekSettings``
reads ``DEEPSEEK_*`` from the environment; ``preflight`` checks key, balance, endpoint and model
with one ``GET /models`` before a live run. ``dsh_llm_deepseek.testing`` ships a scripted model
server speaking the same protocol on 127.0.0.1.

``ALLOW_MODEL_REQUESTS`` is the switch against accidental live calls (as in pydantic-ai): set
it to ``False`` (or ``DSH_ALLOW_MODEL_REQUESTS=0`` in the environment) and the client and
``preflight`` refuse, before connecting, any host but loopback. Test suites and replay runs
turn it off.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from dsh_llm_deepseek._guard import (
    ALLOW_MODEL_REQUESTS_ENV,
    ModelRequestsDisabledError,
    model_requests_allowed,
)
from dsh_llm_deepseek._settings import (
    DEFAULT_MODEL,
    PROVIDER,
    SERVED_MODELS,
    DeepSeekSettings,
    ReasoningEffort,
    Thinking,
)

ALLOW_MODEL_REQUESTS = True
"""Whether the client may reach a non-loopback host; ``False`` in tests (see above)."""

if TYPE_CHECKING:
    from dsh_llm_deepseek._client import SESSION_HEADER, DeepSeekClient
    from dsh_llm_deepseek._preflight import PreflightError, ServedModels, preflight

__all__ = [
    # client
    "SESSION_HEADER",
    "DeepSeekClient",
    # the switch against live calls
    "ALLOW_MODEL_REQUESTS",
    "ALLOW_MODEL_REQUESTS_ENV",
    "ModelRequestsDisabledError",
    "model_requests_allowed",
    # preflight
    "PreflightError",
    "ServedModels",
    "preflight",
    # settings
    "DEFAULT_MODEL",
    "PROVIDER",
    "SERVED_MODELS",
    "DeepSeekSettings",
    "ReasoningEffort",
    "Thinking",
]

# The client and preflight import httpx and tenacity (~0.25 s); a replayed agent needs only
# the settings (what it would send), so those load on first use.
_LAZY = {
    "SESSION_HEADER": "dsh_llm_deepseek._client",
    "DeepSeekClient": "dsh_llm_deepseek._client",
    "PreflightError": "dsh_llm_deepseek._preflight",
    "ServedModels": "dsh_llm_deepseek._preflight",
    "preflight": "dsh_llm_deepseek._preflight",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)

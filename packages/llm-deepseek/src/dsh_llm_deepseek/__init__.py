"""dsh-llm-deepseek: DeepSeek's OpenAI-compatible streaming chat API as a dsh ``ModelClient``.

``DeepSeekClient`` maps each step's :class:`dsh_core.ModelRequest` to a streaming
``POST /chat/completions`` and the server-sent events back to dsh chunks; ``DeepSeekSettings``
reads ``DEEPSEEK_*`` from the environment; ``preflight`` checks key, balance, endpoint and model
with one ``GET /models`` before a live run. ``dsh_llm_deepseek.testing`` ships a scripted model
server speaking the same protocol on 127.0.0.1.
"""

from dsh_llm_deepseek._client import SESSION_HEADER, DeepSeekClient
from dsh_llm_deepseek._preflight import PreflightError, ServedModels, preflight
from dsh_llm_deepseek._settings import (
    DEFAULT_MODEL,
    SERVED_MODELS,
    DeepSeekSettings,
    ReasoningEffort,
    Thinking,
)

__all__ = [
    # client
    "SESSION_HEADER",
    "DeepSeekClient",
    # preflight
    "PreflightError",
    "ServedModels",
    "preflight",
    # settings
    "DEFAULT_MODEL",
    "SERVED_MODELS",
    "DeepSeekSettings",
    "ReasoningEffort",
    "Thinking",
]

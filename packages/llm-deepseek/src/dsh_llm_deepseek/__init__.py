"""dsh-llm-deepseek: DeepSeek as a profile on the OpenAI-compatible chat-completions wire.

The wire (client, stream parser, request builder, failures, redaction, preflight) is
``dsh-llm-openai``'s; this package is DeepSeek's part of it: ``DeepSeekSettings`` reads
``DEEPSEEK_*`` and knows the models DeepSeek serves, its ``thinking`` / ``reasoning_effort``
fields, the ``reasoning_content`` it wants back and the rules its live API enforces;
``DeepSeekClient`` is the wire's client on those settings; ``preflight`` checks key, balance,
endpoint and model with one ``GET /models`` before a live run; the ``dsh.models`` entry point
``deepseek`` makes a client from the environment.

``ALLOW_MODEL_REQUESTS`` is the switch against accidental live calls (as in pydantic-ai): set
it (or ``dsh_llm_openai.ALLOW_MODEL_REQUESTS``) to ``False``, or ``DSH_ALLOW_MODEL_REQUESTS=0``
in the environment, and the client and ``preflight`` refuse, before connecting, any host but
loopback. Test suites and replay runs turn it off.

``dsh_llm_deepseek.testing`` is a deprecated alias of ``dsh_scripted_server`` (removal in
0.3.0).
"""

from typing import TYPE_CHECKING

from dsh_core import lazy_exports
from dsh_llm_deepseek._settings import (
    DEFAULT_MODEL,
    PROVIDER,
    SERVED_MODELS,
    DeepSeekSettings,
    ReasoningEffort,
    Thinking,
)
from dsh_llm_openai import (
    ALLOW_MODEL_REQUESTS_ENV,
    SESSION_HEADER,
    ModelRequestsDisabledError,
)
from dsh_llm_openai import model_requests_allowed as _wire_allowed

ALLOW_MODEL_REQUESTS = True
"""Whether a DeepSeek client may reach a non-loopback host; ``False`` in tests (see above)."""


def model_requests_allowed() -> bool:
    """Whether live DeepSeek calls are on: this package's and ``dsh_llm_openai``'s
    ``ALLOW_MODEL_REQUESTS`` are true and the environment does not say 0."""
    return _wire_allowed(__name__)


if TYPE_CHECKING:
    from dsh_llm_deepseek._client import DeepSeekClient
    from dsh_llm_openai import PreflightError, ServedModels, preflight

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
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DeepSeekClient": "._client",
        "PreflightError": "dsh_llm_openai",
        "ServedModels": "dsh_llm_openai",
        "preflight": "dsh_llm_openai",
    },
)

"""The wire's side of core's live-call guard (:func:`dsh_core.check_model_request`).

The switch, the loopback rule and the error live in core, once for every provider; the wire
adds what only an HTTP client knows: a transport other than httpx's network transport (an
in-memory or mock transport) opens no socket of ours, so it is never refused. The wire's own
``dsh_llm_openai.ALLOW_MODEL_REQUESTS`` and the profile package's count as core's does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_core import (
    ALLOW_MODEL_REQUESTS_ENV,
    ModelRequestsDisabledError,
    check_model_request,
)
from dsh_core import model_requests_allowed as _core_allowed

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ALLOW_MODEL_REQUESTS_ENV",
    "ModelRequestsDisabledError",
    "check_model_request_allowed",
    "model_requests_allowed",
]

_WIRE = "dsh_llm_openai"


def model_requests_allowed(profile_package: str | None = None) -> bool:
    """Whether live calls are on for the wire (and ``profile_package``'s clients): see
    :func:`dsh_core.model_requests_allowed`."""
    return _core_allowed(_WIRE, profile_package)


def check_model_request_allowed(
    url: str, transport: httpx.AsyncBaseTransport | None, profile_package: str | None = None
) -> None:
    """Refuse ``url`` when live calls are off and the request would leave this machine.

    ``profile_package`` is the top-level package of the settings' class
    (``dsh_llm_deepseek``): its own ``ALLOW_MODEL_REQUESTS`` counts too.

    Raises:
        ModelRequestsDisabledError: live calls are off and ``url`` is not on a loopback host.
    """
    import httpx  # noqa: PLC0415 - only a live client gets here; a replayed agent never loads it

    if transport is not None and not isinstance(transport, httpx.AsyncHTTPTransport):
        return
    check_model_request(url, _WIRE, profile_package)

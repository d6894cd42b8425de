"""The switch against accidental live model calls (as pydantic-ai's ``ALLOW_MODEL_REQUESTS``).

Test suites and replay runs turn live calls off; a client then refuses, before any socket is
opened, to reach a model anywhere but on this machine. Loopback stays allowed because the
scripted model server and the contract server are real HTTP servers on 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import urllib.parse
from typing import TYPE_CHECKING

from dsh_core import ALLOW_MODEL_REQUESTS_ENV, ModelError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ALLOW_MODEL_REQUESTS_ENV",
    "ModelRequestsDisabledError",
    "check_model_request_allowed",
    "model_requests_allowed",
]

_OFF = frozenset({"0", "false", "no", "off"})


_WIRE = "dsh_llm_openai"


class ModelRequestsDisabledError(ModelError):
    """A live model call was refused because live calls are turned off."""

    def __init__(self, url: str, switch: str = _WIRE) -> None:
        super().__init__(
            f"live model requests are disabled ({switch}.ALLOW_MODEL_REQUESTS is False "
            f"or {ALLOW_MODEL_REQUESTS_ENV}=0): refusing to connect to {url}; only loopback "
            f"hosts (127.0.0.1, ::1, localhost) are allowed while it is off",
            code="MODEL_REQUESTS_DISABLED",
        )
        self.url = url


def _switched_off(package: str) -> bool:
    module = sys.modules.get(package)
    return module is not None and not getattr(module, "ALLOW_MODEL_REQUESTS", True)


def model_requests_allowed(profile_package: str | None = None) -> bool:
    """Whether live calls are on: ``dsh_llm_openai.ALLOW_MODEL_REQUESTS`` (and the profile
    package's own ``ALLOW_MODEL_REQUESTS``, when ``profile_package`` names one) is true and
    the environment does not say 0."""
    for package in (_WIRE, profile_package):
        if package is not None and _switched_off(package):
            return False
    return os.environ.get(ALLOW_MODEL_REQUESTS_ENV, "").strip().lower() not in _OFF


def _is_loopback(url: str) -> bool:
    host = (urllib.parse.urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it could resolve anywhere


def check_model_request_allowed(
    url: str, transport: httpx.AsyncBaseTransport | None, profile_package: str | None = None
) -> None:
    """Refuse ``url`` when live calls are off and the request would leave this machine.

    A transport other than httpx's network transport (an in-memory or mock transport) opens
    no socket of ours, so it is never refused. ``profile_package`` is the top-level package of
    the settings' class (``dsh_llm_deepseek``): its own ``ALLOW_MODEL_REQUESTS`` counts too.

    Raises:
        ModelRequestsDisabledError: live calls are off and ``url`` is not on a loopback host.
    """
    import httpx  # noqa: PLC0415 - only a live client gets here; a replayed agent never loads it

    if transport is not None and not isinstance(transport, httpx.AsyncHTTPTransport):
        return
    if model_requests_allowed(profile_package) or _is_loopback(url):
        return
    switch = _WIRE if _switched_off(_WIRE) or profile_package is None else profile_package
    raise ModelRequestsDisabledError(url, switch)

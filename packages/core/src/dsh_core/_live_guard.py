"""The one switch against accidental live model calls (as pydantic-ai's ``ALLOW_MODEL_REQUESTS``).

Every model client that opens a connection asks :func:`check_model_request` first, with the URL
it is about to reach: while live calls are off it is refused, before any socket is opened,
unless the host is this machine (the scripted model server and contract servers are real HTTP
servers on 127.0.0.1). Live calls are off when ``dsh_core.ALLOW_MODEL_REQUESTS`` is ``False``,
when ``DSH_ALLOW_MODEL_REQUESTS`` says 0 (test suites through ``dsh_core.testing.live_guard``,
replay runs), or when a package on the call's path (the wire, the vendor profile) sets its own
``ALLOW_MODEL_REQUESTS`` to ``False``. No provider keeps a switch of its own.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import urllib.parse
from collections.abc import Iterable

from dsh_core._model import ALLOW_MODEL_REQUESTS_ENV, ModelError

__all__ = [
    "ModelRequestsDisabledError",
    "check_model_request",
    "is_loopback_url",
    "model_requests_allowed",
]

_CORE = "dsh_core"
_OFF = frozenset({"0", "false", "no", "off"})


class ModelRequestsDisabledError(ModelError):
    """A live model call was refused because live calls are turned off.

    Attributes:
        url: the URL the client was about to reach.
    """

    def __init__(self, url: str, switch: str = _CORE) -> None:
        super().__init__(
            f"live model requests are disabled ({switch}.ALLOW_MODEL_REQUESTS is False "
            f"or {ALLOW_MODEL_REQUESTS_ENV}=0): refusing to connect to {url}; only loopback "
            f"hosts (127.0.0.1, ::1, localhost) are allowed while it is off",
            code="MODEL_REQUESTS_DISABLED",
        )
        self.url = url


def _switched_off(package: str) -> bool:
    # Only a package already imported can have been switched off; never import one to ask.
    module = sys.modules.get(package)
    return module is not None and not getattr(module, "ALLOW_MODEL_REQUESTS", True)


def _off_switch(packages: Iterable[str | None]) -> str | None:
    for package in (_CORE, *packages):
        if package is not None and _switched_off(package):
            return package
    return None


def model_requests_allowed(*packages: str | None) -> bool:
    """Whether live calls are on: ``dsh_core.ALLOW_MODEL_REQUESTS`` and each named package's
    own ``ALLOW_MODEL_REQUESTS`` (when it has one) are true, and ``DSH_ALLOW_MODEL_REQUESTS``
    does not say 0."""
    if _off_switch(packages) is not None:
        return False
    return os.environ.get(ALLOW_MODEL_REQUESTS_ENV, "").strip().lower() not in _OFF


def is_loopback_url(url: str) -> bool:
    """Whether ``url``'s host is this machine: ``localhost`` or a loopback address (a name
    other than ``localhost`` could resolve anywhere, so it is not)."""
    host = (urllib.parse.urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_model_request(url: str, *packages: str | None) -> None:
    """Refuse ``url`` when live calls are off and the request would leave this machine.

    Args:
        url: what the client is about to connect to.
        packages: the packages on the call's path whose ``ALLOW_MODEL_REQUESTS`` also counts
            (the wire's, the profile's: ``"dsh_llm_openai"``, ``"dsh_llm_deepseek"``).

    Raises:
        ModelRequestsDisabledError: live calls are off and ``url`` is not on a loopback host;
            the message names the switch that is off.
    """
    if model_requests_allowed(*packages) or is_loopback_url(url):
        return
    named = [p for p in packages if p is not None]
    raise ModelRequestsDisabledError(url, _off_switch(packages) or (named[-1] if named else _CORE))

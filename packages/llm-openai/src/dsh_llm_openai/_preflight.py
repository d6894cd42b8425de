"""``preflight``: one ``GET /models`` with the key before any live call.

A record run calls it first, so that a rejected key, an exhausted balance, an unreachable
endpoint or a model the endpoint does not serve stop the run before anything is written, in one
line that says what to do.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Literal, cast

import httpx
from pydantic import SecretStr

from dsh_core import DshError
from dsh_llm_openai._failures import backoff, retry_after_seconds
from dsh_llm_openai._guard import check_model_request_allowed
from dsh_llm_openai._redact import Redactor, one_line, summarise_body
from dsh_llm_openai._settings import ChatSettings

__all__ = ["PreflightError", "ServedModels", "preflight"]

_MAX_BODY = 1 << 20  # a model list is a few hundred bytes; a bigger body is not one

PreflightProblem = Literal["no-key", "auth", "balance", "unreachable", "model", "http", "protocol"]


class PreflightError(DshError):
    """The endpoint cannot serve a live run; ``str()`` is one line saying what to do.

    Attributes:
        problem: ``no-key``, ``auth`` (401/403), ``balance`` (402), ``unreachable`` (connection
            failure or timeout), ``model`` (the configured model is not served), ``http`` (any
            other status) or ``protocol`` (the answer is not a model list).
        status: the HTTP status, when there was a response.
        served: the model names the endpoint serves (known for ``model`` only, else empty).
    """

    def __init__(
        self,
        problem: PreflightProblem,
        message: str,
        *,
        status: int | None = None,
        served: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.problem: PreflightProblem = problem
        self.message = message
        self.status = status
        self.served = served


@dataclass(frozen=True, slots=True)
class ServedModels:
    """What ``GET {base_url}/models`` answered.

    Attributes:
        base_url: the endpoint asked (the settings' ``base_url``).
        model: the configured model (the settings' ``model``); always one of ``names``.
        names: the served model ids, in the endpoint's order.
    """

    base_url: str
    model: str
    names: tuple[str, ...]


async def preflight(
    settings: ChatSettings, *, transport: httpx.AsyncBaseTransport | None = None
) -> ServedModels:
    """Check that the endpoint takes the key and serves the configured model.

    Sends ``GET {base_url}/models`` with ``Authorization: Bearer <key>``, never a chat call;
    an unreachable endpoint, 429 or 5xx is retried with the client's policy
    (``max_retries``, ``Retry-After``, back-off) before it is reported.

    Args:
        settings: the settings a live run will use (key, base URL, model, timeouts).
        transport: an httpx transport to use instead of the network (tests, proxies).

    Returns:
        The served model names.

    Raises:
        PreflightError: the run cannot start; ``str()`` is one line saying what to do.
        ModelRequestsDisabledError: live calls are off (``ALLOW_MODEL_REQUESTS``) and
            ``base_url`` is not on a loopback host; raised before any connection.
    """
    base = settings.base_url.rstrip("/")
    url = f"{base}/models"
    key = settings.api_key
    if key is None or not key.get_secret_value().strip():
        raise PreflightError(
            "no-key",
            f"no {settings.label} API key: set {settings.env_name('api_key')} "
            "(or put it in ./.env) and rerun",
        )
    check_model_request_allowed(url, transport, type(settings).__module__.partition(".")[0])
    attempt = 1
    while True:
        fetched = await _fetch(url, key, settings, transport)
        transient = isinstance(fetched, PreflightError) or fetched[0] == 429 or fetched[0] >= 500
        if not transient or attempt > settings.max_retries:
            break
        # The client's policy: an overloaded or briefly unreachable endpoint gets its retries.
        retry_after = None if isinstance(fetched, PreflightError) else fetched[4]
        await asyncio.sleep(backoff(settings, attempt, retry_after))
        attempt += 1
    if isinstance(fetched, PreflightError):
        raise fetched
    status, reason, raw, truncated, _ = fetched
    text = Redactor(key)(raw.decode("utf-8", "replace"), truncated=truncated)
    return _served(status, reason, text, url, settings)


async def _fetch(
    url: str,
    key: SecretStr,
    settings: ChatSettings,
    transport: httpx.AsyncBaseTransport | None,
) -> tuple[int, str, bytes, bool, float | None] | PreflightError:
    """Status, reason, bounded body, whether it was cut and ``Retry-After``; or the failure,
    returned rather than raised so that no httpx request (with its Authorization header)
    rides along as ``__context__``."""
    timeout = httpx.Timeout(settings.connect_timeout, read=settings.stream_idle_timeout)
    async with httpx.AsyncClient(timeout=timeout, transport=transport) as http:
        try:
            request = http.build_request("GET", url, headers={"Accept": "application/json"})
            request.headers["Authorization"] = "Bearer " + key.get_secret_value()
            response = await http.send(request, stream=True)
            try:
                raw, truncated = await _bounded_body(response)
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            what = Redactor(key)(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            return PreflightError(
                "unreachable",
                f"cannot reach {url} ({one_line(what, 160)}): "
                f"check {settings.env_name('base_url')} and the network, then rerun",
            )
    retry_after = retry_after_seconds(response.headers.get("Retry-After"))
    return response.status_code, response.reason_phrase, raw, truncated, retry_after


async def _bounded_body(response: httpx.Response) -> tuple[bytes, bool]:
    """At most ``_MAX_BODY`` bytes of the body, and whether there was more."""
    parts: list[bytes] = []
    size = 0
    async for part in response.aiter_bytes():
        parts.append(part)
        size += len(part)
        if size > _MAX_BODY:
            return b"".join(parts)[:_MAX_BODY], True
    return b"".join(parts), False


def _served(status: int, reason: str, text: str, url: str, settings: ChatSettings) -> ServedModels:
    base, model = settings.base_url.rstrip("/"), settings.model
    said = summarise_body(text, reason or f"HTTP {status}")
    if status in (401, 403):
        raise PreflightError(
            "auth",
            f"{base} rejected the API key (HTTP {status}: {said}): "
            f"set {settings.env_name('api_key')} to a valid key and rerun",
            status=status,
        )
    if status == 402:
        where = f" at {settings.billing_url}" if settings.billing_url else ""
        raise PreflightError(
            "balance",
            f"the {settings.label} account's balance is exhausted (HTTP 402: {said}): "
            f"top it up{where} and rerun",
            status=status,
        )
    if status != 200:
        raise PreflightError(
            "http",
            f"GET {url} answered HTTP {status} ({said}): check {settings.env_name('base_url')}, "
            "or retry later if the service is down",
            status=status,
        )
    names = _model_names(text)
    if names is None:
        raise PreflightError(
            "protocol",
            f"GET {url} did not answer a model list ({said}): "
            f"check that {settings.env_name('base_url')} is an OpenAI-compatible API root",
            status=status,
        )
    if model not in names:
        served = ", ".join(names) if names else "(none)"
        raise PreflightError(
            "model",
            f"{base} does not serve model {model!r}: "
            f"set {settings.env_name('model')} to one of: {served}",
            status=status,
            served=names,
        )
    return ServedModels(base_url=base, model=model, names=names)


def _model_names(text: str) -> tuple[str, ...] | None:
    """The ids of an OpenAI-style model list (``{"object": "list", "data": [{"id": …}]}``)."""
    try:
        doc: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    data = cast(dict[str, Any], doc).get("data")
    if not isinstance(data, list):
        return None
    names: list[str] = []
    for entry in cast(list[Any], data):
        if not isinstance(entry, dict):
            return None
        name = cast(dict[str, Any], entry).get("id")
        if not isinstance(name, str):
            return None
        names.append(name)
    return tuple(names)

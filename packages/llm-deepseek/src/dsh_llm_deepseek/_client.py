"""``DeepSeekClient``: the streaming chat-completions client (httpx + tenacity)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Generator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, cast

import httpx
from pydantic import SecretStr
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from dsh_core import Chunk, ModelError, ModelRequest
from dsh_llm_deepseek._request import build_body
from dsh_llm_deepseek._settings import DeepSeekSettings
from dsh_llm_deepseek._stream import DONE, ChunkMapper, decode_event, protocol_error, sse_data

__all__ = ["SESSION_HEADER", "DeepSeekClient"]

SESSION_HEADER = "X-DSH-Session-Id"
"""Request header carrying the live session id (the scripted server and replay route by it)."""

_log = logging.getLogger("dsh_llm_deepseek")
_MAX_ERROR_BODY = 4096
_REDACTED = "[redacted]"


class _BearerAuth(httpx.Auth):
    """Adds the key at send time, so no request-building frame of ours holds it in a local."""

    def __init__(self, key: SecretStr) -> None:
        self._key = key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = "Bearer " + self._key.get_secret_value()
        yield request

    def __repr__(self) -> str:
        return "_BearerAuth(key=SecretStr('**********'))"


class _Transient(Exception):
    """A failure before the first chunk that is worth another attempt."""

    def __init__(self, error: ModelError, retry_after: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after


@dataclass(slots=True)
class _Opened:
    response: httpx.Response
    events: AsyncGenerator[str, None]
    mapper: ChunkMapper
    first: list[Chunk]
    done: bool


class DeepSeekClient:
    """A :class:`dsh_core.ModelClient` for DeepSeek's OpenAI-compatible chat-completions API.

    Each :meth:`stream` call sends one ``POST {base_url}/chat/completions`` with
    ``stream: true`` and yields chunks as the server-sent events arrive. Transient failures
    (connection errors, timeouts, HTTP 429 and 5xx) are retried only before the first chunk;
    once a chunk has been yielded, any failure raises :class:`dsh_core.ModelError`.

    Args:
        settings: connection and retry settings; read from the environment when omitted.
        transport: an httpx transport to use instead of the network (tests, proxies).
    """

    def __init__(
        self,
        settings: DeepSeekSettings | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._settings = settings if settings is not None else DeepSeekSettings()
        s = self._settings
        self._url = s.base_url.rstrip("/") + "/chat/completions"
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=s.connect_timeout,
                read=s.read_timeout,
                write=s.read_timeout,
                pool=s.connect_timeout,
            ),
            transport=transport,
        )
        self._auth = _BearerAuth(s.api_key) if s.api_key is not None else None

    @property
    def settings(self) -> DeepSeekSettings:
        """The settings in use (the key stays a ``SecretStr``)."""
        return self._settings

    def __repr__(self) -> str:
        s = self._settings
        return f"DeepSeekClient(base_url={s.base_url!r}, model={s.model!r})"

    async def __aenter__(self) -> DeepSeekClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Stream one step's chunks.

        Yields:
            ``block-start``/delta chunks as they arrive, then every ``block-end`` (index order),
            ``usage`` (when the server reported it) and ``finish``.

        Raises:
            ModelError: ``code`` is ``AUTH`` (401/403 or no key), ``BAD_REQUEST`` (400),
                ``RATE_LIMIT`` / ``SERVER`` / ``NETWORK`` / ``TIMEOUT`` (after retries, or at
                once mid-stream), ``HTTP_<status>`` (other 4xx) or ``PROTOCOL`` (bad stream).
        """
        if self._auth is None:
            raise ModelError("DeepSeek API key is not set (DEEPSEEK_API_KEY)", code="AUTH")
        s = self._settings
        body = build_body(request, model=s.model, max_tokens=s.max_tokens)
        opened = await self._open_with_retries(body, request.session_id)
        try:
            for chunk in opened.first:
                yield chunk
            if not opened.done:
                async for chunks in self._rest(opened):
                    for chunk in chunks:
                        yield chunk
            for chunk in opened.mapper.end():
                yield chunk
        finally:
            await opened.events.aclose()
            await opened.response.aclose()

    # --- opening: everything up to the first chunk, retried ---------------------------------

    async def _open_with_retries(self, body: dict[str, Any], session_id: str) -> _Opened:
        s = self._settings
        retrying = AsyncRetrying(
            stop=stop_after_attempt(s.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(_Transient),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._open(body, session_id)
        except _Transient as exc:
            raise exc.error from exc.__cause__
        raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover

    def _wait(self, state: RetryCallState) -> float:
        s = self._settings
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, _Transient) and exc.retry_after is not None:
            return min(exc.retry_after, s.max_retry_after)
        return min(s.retry_base_wait * 2 ** (state.attempt_number - 1), s.retry_max_wait)

    def _log_retry(self, state: RetryCallState) -> None:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        wait = state.upcoming_sleep
        _log.warning(
            "DeepSeek attempt %d failed (%s); retrying in %.2fs", state.attempt_number, exc, wait
        )

    async def _open(self, body: dict[str, Any], session_id: str) -> _Opened:
        s = self._settings
        request = self._http.build_request(
            "POST",
            self._url,
            json=body,
            headers={SESSION_HEADER: session_id, "Accept": "text/event-stream"},
        )
        _log.debug("DeepSeek request: POST %s session=%s model=%s", self._url, session_id, s.model)
        try:
            async with asyncio.timeout(s.first_byte_timeout):
                response = await self._http.send(request, auth=self._auth, stream=True)
        except TimeoutError:
            raise _Transient(
                ModelError(
                    f"DeepSeek API error (timeout): no response within {s.first_byte_timeout}s",
                    code="TIMEOUT",
                )
            ) from None
        except httpx.TimeoutException as exc:
            raise _Transient(
                ModelError(f"DeepSeek API error (timeout): {_describe(exc)}", code="TIMEOUT")
            ) from None
        except httpx.TransportError as exc:
            raise _Transient(
                ModelError(f"DeepSeek API error (network): {_describe(exc)}", code="NETWORK")
            ) from None
        _log.debug("DeepSeek response: HTTP %d session=%s", response.status_code, session_id)
        if response.status_code != 200:
            await self._raise_status(response)
        opened = _Opened(response, sse_data(response.aiter_lines()), ChunkMapper(), [], False)
        try:
            while not opened.first and not opened.done:
                opened.done, opened.first = await self._next(opened)
        except BaseException:
            await opened.events.aclose()
            await response.aclose()
            raise
        return opened

    async def _raise_status(self, response: httpx.Response) -> None:
        status = response.status_code
        message = await self._error_message(response)
        text = f"DeepSeek API error (HTTP {status}): {message}"
        if status == 429:
            raise _Transient(
                ModelError(text, code="RATE_LIMIT", status=status),
                _retry_after(response.headers.get("Retry-After")),
            )
        if status >= 500:  # a 503 may say when to come back, too
            raise _Transient(
                ModelError(text, code="SERVER", status=status),
                _retry_after(response.headers.get("Retry-After")),
            )
        code = {400: "BAD_REQUEST", 401: "AUTH", 403: "AUTH"}.get(status, f"HTTP_{status}")
        raise ModelError(text, code=code, status=status)

    async def _error_message(self, response: httpx.Response) -> str:
        """The server's error message, redacted; the raw body dies with this frame."""
        try:
            raw = await response.aread()
        except httpx.HTTPError:
            raw = b""
        finally:
            await response.aclose()
        return self._redact(_server_message(raw[:_MAX_ERROR_BODY], response.reason_phrase))

    # --- reading -----------------------------------------------------------------------------

    async def _next(self, opened: _Opened) -> tuple[bool, list[Chunk]]:
        """Read one event: ``(done, chunks)``. Transport failures raise ``_Transient``."""
        try:
            data = await anext(opened.events, None)
        except httpx.TimeoutException as exc:
            raise _Transient(
                ModelError(f"DeepSeek API error (timeout): {_describe(exc)}", code="TIMEOUT")
            ) from None
        except httpx.TransportError as exc:
            raise _Transient(
                ModelError(
                    f"DeepSeek API error (network): connection failed mid-stream: {_describe(exc)}",
                    code="NETWORK",
                )
            ) from None
        if data is None:
            if opened.mapper.finish_reason is None:
                raise protocol_error("the stream ended before a finish_reason")
            return True, []
        if data == DONE:
            return True, []
        return False, opened.mapper.feed(decode_event(data))

    async def _rest(self, opened: _Opened) -> AsyncIterator[list[Chunk]]:
        done = False
        while not done:
            try:
                done, chunks = await self._next(opened)
            except _Transient as exc:  # past the first chunk: no retry
                raise exc.error from None
            if chunks:
                yield chunks

    def _redact(self, text: str) -> str:
        key = self._settings.api_key
        if key is not None and key.get_secret_value():
            return text.replace(key.get_secret_value(), _REDACTED)
        return text


def _describe(exc: httpx.HTTPError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: fall back to our own back-off
    return max(seconds, 0.0)


def _server_message(raw: bytes, reason: str) -> str:
    text = raw.decode("utf-8", "replace").strip()
    try:
        doc = json.loads(text)
    except ValueError:
        return text or reason
    if isinstance(doc, dict):
        error = cast(dict[str, Any], doc).get("error")
        if isinstance(error, dict):
            message = cast(dict[str, Any], error).get("message")
            if isinstance(message, str):
                return message
        if isinstance(error, str):
            return error
    return text or reason

"""``DeepSeekClient``: the streaming chat-completions client (httpx + tenacity)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx
from pydantic import SecretStr
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
)

from dsh_core import Chunk, ModelError, ModelRequest, RequestConfig
from dsh_llm_deepseek._failures import (
    AttemptFailed,
    Failure,
    backoff,
    finish_failure,
    retry_after_seconds,
    status_failure,
)
from dsh_llm_deepseek._guard import check_model_request_allowed
from dsh_llm_deepseek._redact import Redactor, one_line, summarise_body
from dsh_llm_deepseek._request import build_body
from dsh_llm_deepseek._settings import DeepSeekSettings
from dsh_llm_deepseek._stream import DONE, ChunkMapper, decode_event, protocol_error, sse_data

__all__ = ["SESSION_HEADER", "DeepSeekClient"]

SESSION_HEADER = "X-DSH-Session-Id"
"""Request header carrying the live session id, sent when ``send_session_id`` is set (the
scripted model server routes by it)."""

_log = logging.getLogger("dsh_llm_deepseek")
# An error body is read up to this size, redacted, and only then cut to one line.
_MAX_ERROR_BODY = 64 * 1024


class _BearerAuth(httpx.Auth):
    """Adds the key at send time, so no request-building frame of ours holds it in a local."""

    def __init__(self, key: SecretStr) -> None:
        self._key = key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = "Bearer " + self._key.get_secret_value()
        yield request

    def __repr__(self) -> str:
        return "_BearerAuth(key=SecretStr('**********'))"


@dataclass(slots=True)
class _Opened:
    response: httpx.Response
    events: AsyncGenerator[str, None]
    mapper: ChunkMapper
    first: list[Chunk]
    done: bool


class _Clock:
    """The timing rules of one ``stream()`` call (upstream's idle watchdog, plus a deadline)."""

    def __init__(self, idle: float, deadline: float | None) -> None:
        self.idle = idle
        self.total = deadline
        self._until = None if deadline is None else time.monotonic() + deadline

    def budget(self) -> float:
        """Seconds the next read may wait: the idle timeout, or less when the deadline is near."""
        if self._until is None:
            return self.idle
        return max(0.0, min(self.idle, self._until - time.monotonic()))

    def timed_out(self) -> ModelError:
        """The error for a read that used up its budget."""
        if self._until is not None and time.monotonic() >= self._until - 1e-3:
            return ModelError(
                f"DeepSeek API error (timeout): the call exceeded its deadline of {self.total:g}s"
                " (DEEPSEEK_STREAM_DEADLINE)",
                code="TIMEOUT",
            )
        return ModelError(
            f"DeepSeek API error (timeout): no data for {self.idle:g}s"
            " (stream idle timeout, DEEPSEEK_STREAM_IDLE_TIMEOUT)",
            code="TIMEOUT",
        )

    def expired(self) -> bool:
        return self._until is not None and time.monotonic() >= self._until


async def _timed_lines(lines: AsyncIterator[str], clock: _Clock) -> AsyncGenerator[str, None]:
    """``lines``, each read bounded by the clock: any line (a keep-alive too) re-arms it."""
    iterator = aiter(lines)
    while True:
        try:
            async with asyncio.timeout(clock.budget()):
                line = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise AttemptFailed(Failure(clock.timed_out(), not clock.expired())) from None
        yield line


class DeepSeekClient:
    """A :class:`dsh_core.ModelClient` for DeepSeek's OpenAI-compatible chat-completions API.

    Each :meth:`stream` call sends one ``POST {base_url}/chat/completions`` with
    ``stream: true`` and yields chunks as the server-sent events arrive. Transient failures
    (transport errors, timeouts, HTTP 429 and 5xx, an empty completion,
    ``insufficient_system_resource``) are retried only before the first chunk; once a chunk has
    been yielded, any failure raises :class:`dsh_core.ModelError`.

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
        # Reads are bounded by our own idle watchdog (``_Clock``), so httpx has no read timeout.
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=s.connect_timeout,
                read=None,
                write=s.stream_idle_timeout,
                pool=s.connect_timeout,
            ),
            transport=transport,
        )
        self._transport = transport
        self._auth = _BearerAuth(s.api_key) if s.api_key is not None else None
        self._redact = Redactor(s.api_key)

    @property
    def settings(self) -> DeepSeekSettings:
        """The settings in use (the key stays a ``SecretStr``)."""
        return self._settings

    @property
    def request_config(self) -> RequestConfig:
        """The route and sampling settings every request sends (see
        :meth:`DeepSeekSettings.request_config`)."""
        return self._settings.request_config()

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
            ModelError: ``code`` is ``AUTH`` (401/403 or no key), ``QUOTA`` (402, or a 429 for
                an exhausted balance), ``BAD_REQUEST`` / ``CONTEXT_WINDOW_EXCEEDED`` (400),
                ``RATE_LIMIT`` / ``SERVER`` / ``NETWORK`` / ``TIMEOUT`` / ``EMPTY_RESPONSE`` /
                ``INSUFFICIENT_SYSTEM_RESOURCE`` (after retries, or at once mid-stream),
                ``CONTENT_FILTER`` (after the blocks and usage it streamed), ``HTTP_<status>``
                (other 4xx) or ``PROTOCOL`` (bad stream).
            ModelRequestsDisabledError: live calls are off (``ALLOW_MODEL_REQUESTS``) and
                ``base_url`` is not on a loopback host; raised before any connection.
        """
        if self._auth is None:
            raise ModelError("DeepSeek API key is not set (DEEPSEEK_API_KEY)", code="AUTH")
        check_model_request_allowed(self._url, self._transport)
        s = self._settings
        body = build_body(
            request,
            model=s.model,
            max_tokens=s.max_tokens,
            reasoning_effort=s.effective_reasoning_effort,
        )
        headers = {"Accept": "text/event-stream"}
        if s.send_session_id:
            headers[SESSION_HEADER] = request.session_id
        clock = _Clock(s.stream_idle_timeout, s.stream_deadline)
        opened = await self._open_with_retries(body, headers, clock)
        try:
            for chunk in opened.first:
                yield chunk
            if not opened.done:
                async for chunks in self._rest(opened):
                    for chunk in chunks:
                        yield chunk
            failure = finish_failure(opened.mapper.finish_reason, opened.mapper.block_count)
            for chunk in opened.mapper.end(finish=failure is None):
                yield chunk
            if failure is not None:  # what streamed is kept; the turn ends with the reason
                raise failure.error
        finally:
            await opened.events.aclose()
            await opened.response.aclose()

    # --- opening: everything up to the first chunk, retried ---------------------------------

    async def _open_with_retries(
        self, body: dict[str, Any], headers: dict[str, str], clock: _Clock
    ) -> _Opened:
        s = self._settings
        stop = stop_after_attempt(s.max_retries + 1)
        if s.stream_deadline is not None:
            stop = stop | stop_before_delay(s.stream_deadline)
        retrying = AsyncRetrying(
            stop=stop,
            wait=self._wait,
            retry=retry_if_exception(_retryable),
            before_sleep=self._log_retry,
            reraise=True,
        )
        failure: ModelError | None = None
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._open(body, headers, clock)
        except AttemptFailed as exc:
            failure = exc.failure.error
        # Raised here, outside the handler: nothing of the attempt rides along as __context__.
        assert failure is not None
        raise failure

    def _wait(self, state: RetryCallState) -> float:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        retry_after = exc.failure.retry_after if isinstance(exc, AttemptFailed) else None
        return backoff(self._settings, state.attempt_number, retry_after)

    def _log_retry(self, state: RetryCallState) -> None:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        wait = state.upcoming_sleep
        _log.warning(
            "DeepSeek attempt %d failed (%s); retrying in %.2fs", state.attempt_number, exc, wait
        )

    async def _open(self, body: dict[str, Any], headers: dict[str, str], clock: _Clock) -> _Opened:
        s = self._settings
        request = self._http.build_request("POST", self._url, json=body, headers=headers)
        _log.debug("DeepSeek request: POST %s model=%s", self._url, s.model)
        response = await self._send(request, clock)
        if isinstance(response, Failure):
            raise AttemptFailed(response)
        _log.debug("DeepSeek response: HTTP %d", response.status_code)
        if response.status_code != 200:
            raise AttemptFailed(await self._status_failure(response))
        lines = _timed_lines(response.aiter_lines(), clock)
        opened = _Opened(response, sse_data(lines), ChunkMapper(self._redact), [], False)
        try:
            while not opened.first and not opened.done:
                opened.done, opened.first = await self._next(opened)
            if opened.done and not opened.first and opened.mapper.finish_reason is not None:
                # Nothing yielded yet: an empty or resource-starved completion is retried here.
                empty = finish_failure(opened.mapper.finish_reason, opened.mapper.block_count)
                if empty is not None and empty.retryable:
                    raise AttemptFailed(empty)
        except BaseException:
            await opened.events.aclose()
            await response.aclose()
            raise
        return opened

    async def _send(self, request: httpx.Request, clock: _Clock) -> httpx.Response | Failure:
        """The response headers, or the failure. A failure is returned, not raised, so that the
        httpx error (its request holds the Authorization header) is never kept as __context__."""
        try:
            async with asyncio.timeout(clock.budget()):
                return await self._http.send(request, auth=self._auth, stream=True)
        except TimeoutError:
            return Failure(clock.timed_out(), not clock.expired())
        except httpx.TimeoutException as exc:
            return self._transport_failure("timeout", "TIMEOUT", exc)
        except httpx.HTTPError as exc:
            return self._transport_failure("network", "NETWORK", exc)

    def _transport_failure(self, what: str, code: str, exc: httpx.HTTPError) -> Failure:
        described = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        message = f"DeepSeek API error ({what}): {one_line(self._redact(described))}"
        return Failure(ModelError(message, code=code), True)

    async def _status_failure(self, response: httpx.Response) -> Failure:
        """The failure of a non-200 answer; the body is redacted before it is cut to a line."""
        raw, truncated = b"", False
        try:
            async for part in response.aiter_bytes():
                raw += part
                if len(raw) > _MAX_ERROR_BODY:
                    raw, truncated = raw[:_MAX_ERROR_BODY], True
                    break
        except httpx.HTTPError:
            pass  # what arrived is all there is to say
        finally:
            await response.aclose()
        text = self._redact(raw.decode("utf-8", "replace"), truncated=truncated)
        summary = summarise_body(text, response.reason_phrase or f"HTTP {response.status_code}")
        retry_after = retry_after_seconds(response.headers.get("Retry-After"))
        return status_failure(response.status_code, summary, retry_after)

    # --- reading -----------------------------------------------------------------------------

    async def _next(self, opened: _Opened) -> tuple[bool, list[Chunk]]:
        """Read one event: ``(done, chunks)``. Failures raise ``AttemptFailed``."""
        data = await self._read(opened)
        if isinstance(data, Failure):
            raise AttemptFailed(data)
        if data is None:
            if opened.mapper.finish_reason is None:
                raise protocol_error("the stream ended before a finish_reason")
            return True, []
        if data == DONE:
            return True, []
        return False, opened.mapper.feed(decode_event(data))

    async def _read(self, opened: _Opened) -> str | Failure | None:
        """The next event's data, ``None`` at the end, or the failure (returned: see _send)."""
        try:
            return await anext(opened.events, None)
        except httpx.TimeoutException as exc:
            return self._transport_failure("timeout", "TIMEOUT", exc)
        except httpx.HTTPError as exc:
            return self._transport_failure("network: connection failed mid-stream", "NETWORK", exc)

    async def _rest(self, opened: _Opened) -> AsyncIterator[list[Chunk]]:
        done = False
        while not done:
            step = await self._next_or_error(opened)
            if isinstance(step, ModelError):  # past the first chunk: no retry
                raise step
            done, chunks = step
            if chunks:
                yield chunks

    async def _next_or_error(self, opened: _Opened) -> tuple[bool, list[Chunk]] | ModelError:
        try:
            return await self._next(opened)
        except AttemptFailed as exc:
            return exc.failure.error


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, AttemptFailed) and exc.failure.retryable

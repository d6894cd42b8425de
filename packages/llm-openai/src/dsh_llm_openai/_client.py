"""``ChatClient``: the streaming chat-completions client (httpx + tenacity)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

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
from dsh_llm_openai._failures import (
    AttemptFailed,
    Failure,
    backoff,
    finish_failure,
    retry_after_seconds,
    status_failure,
)
from dsh_llm_openai._guard import check_model_request_allowed
from dsh_llm_openai._redact import Redactor, one_line, summarise_body
from dsh_llm_openai._request import build_body
from dsh_llm_openai._settings import SESSION_HEADER, ChatSettings
from dsh_llm_openai._stream import DONE, ChunkMapper, decode_event, protocol_error, sse_data

__all__ = ["ChatClient"]


_log = logging.getLogger("dsh_llm_openai")

S = TypeVar("S", bound=ChatSettings)
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

    def __init__(self, settings: ChatSettings) -> None:
        idle, deadline = settings.stream_idle_timeout, settings.stream_deadline
        self.label = settings.label
        self.deadline_env = settings.env_name("stream_deadline")
        self.idle_env = settings.env_name("stream_idle_timeout")
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
                f"{self.label} API error (timeout): the call exceeded its deadline of "
                f"{self.total:g}s ({self.deadline_env})",
                code="TIMEOUT",
            )
        return ModelError(
            f"{self.label} API error (timeout): no data for {self.idle:g}s"
            f" (stream idle timeout, {self.idle_env})",
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


class ChatClient(Generic[S]):
    """A :class:`dsh_core.ModelClient` for any OpenAI-compatible chat-completions API.

    Each :meth:`stream` call sends one ``POST {base_url}/chat/completions`` with
    ``stream: true`` and yields chunks as the server-sent events arrive. Transient failures
    (transport errors, timeouts, HTTP 429 and 5xx, an empty completion,
    ``insufficient_system_resource``) are retried only before the first chunk; once a chunk has
    been yielded, any failure raises :class:`dsh_core.ModelError`.

    The settings are the profile: their class says which API this is (its label in messages,
    its extra request fields, whether reasoning goes back); see :class:`ChatSettings`.

    Args:
        settings: connection and retry settings (``ChatSettings()`` reads ``OPENAI_*``).
        transport: an httpx transport to use instead of the network (tests, proxies).
    """

    def __init__(self, settings: S, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._settings = settings
        s = self._settings
        # A profile package's own ALLOW_MODEL_REQUESTS switch counts as the wire's does.
        self._switch = type(s).__module__.partition(".")[0]
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
    def settings(self) -> S:
        """The settings in use (the key stays a ``SecretStr``)."""
        return self._settings

    @property
    def request_config(self) -> RequestConfig:
        """The route and sampling settings every request sends (see
        :meth:`ChatSettings.request_config`)."""
        return self._settings.request_config()

    def __repr__(self) -> str:
        s = self._settings
        return f"{type(self).__name__}(base_url={s.base_url!r}, model={s.model!r})"

    async def __aenter__(self) -> Self:
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
        s = self._settings
        if self._auth is None:
            raise ModelError(f"{s.label} API key is not set ({s.env_name('api_key')})", code="AUTH")
        check_model_request_allowed(self._url, self._transport, self._switch)
        body = build_body(
            request,
            model=s.model,
            max_tokens=s.max_tokens,
            extra=s.body_fields(),
            reasoning_pass_back=s.reasoning_pass_back,
        )
        headers = {"Accept": "text/event-stream"}
        if s.send_session_id:
            headers[SESSION_HEADER] = request.session_id
        clock = _Clock(s)
        opened = await self._open_with_retries(body, headers, clock)
        try:
            for chunk in opened.first:
                yield chunk
            if not opened.done:
                async for chunks in self._rest(opened):
                    for chunk in chunks:
                        yield chunk
            failure = finish_failure(
                opened.mapper.finish_reason, opened.mapper.block_count, s.label
            )
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
            "%s attempt %d failed (%s); retrying in %.2fs",
            self._settings.label,
            state.attempt_number,
            exc,
            wait,
        )

    async def _open(self, body: dict[str, Any], headers: dict[str, str], clock: _Clock) -> _Opened:
        s = self._settings
        request = self._http.build_request("POST", self._url, json=body, headers=headers)
        _log.debug("%s request: POST %s model=%s", s.label, self._url, s.model)
        response = await self._send(request, clock)
        if isinstance(response, Failure):
            raise AttemptFailed(response)
        _log.debug("%s response: HTTP %d", s.label, response.status_code)
        if response.status_code != 200:
            raise AttemptFailed(await self._status_failure(response))
        lines = _timed_lines(response.aiter_lines(), clock)
        mapper = ChunkMapper(self._redact, s.label)
        opened = _Opened(response, sse_data(lines), mapper, [], False)
        try:
            while not opened.first and not opened.done:
                opened.done, opened.first = await self._next(opened)
            if opened.done and not opened.first and opened.mapper.finish_reason is not None:
                # Nothing yielded yet: an empty or resource-starved completion is retried here.
                empty = finish_failure(
                    opened.mapper.finish_reason, opened.mapper.block_count, s.label
                )
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
        label = self._settings.label
        message = f"{label} API error ({what}): {one_line(self._redact(described))}"
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
        return status_failure(response.status_code, summary, retry_after, self._settings.label)

    # --- reading -----------------------------------------------------------------------------

    async def _next(self, opened: _Opened) -> tuple[bool, list[Chunk]]:
        """Read one event: ``(done, chunks)``. Failures raise ``AttemptFailed``."""
        data = await self._read(opened)
        if isinstance(data, Failure):
            raise AttemptFailed(data)
        if data is None:
            if opened.mapper.finish_reason is None:
                raise protocol_error(
                    "the stream ended before a finish_reason", self._settings.label
                )
            return True, []
        if data == DONE:
            return True, []
        return False, opened.mapper.feed(decode_event(data, self._settings.label))

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

"""Issue #8: the key, and any key-shaped token, leaves no provider message on any path.

Redaction runs before any cut, on HTTP error bodies, error events inside the stream, transport
failures, exceptions (str, repr, args, the __cause__ / __context__ chain) and log records.
"""

from __future__ import annotations

import logging
import secrets
import string
import traceback
from collections.abc import AsyncIterator, Callable

import pytest
from pydantic import SecretStr

from dsh_core import Chunk, ModelError, ModelRequest
from dsh_llm_openai import ChatClient, ChatSettings
from dsh_llm_openai._redact import REDACTED, Redactor
from dsh_scripted_server import Fault, Response, ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., ChatSettings]

TEXT: list[Chunk] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "fine"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "fine"}},
    {"type": "finish", "reason": {"kind": "stop"}},
]


def _fake_key() -> str:
    """A key-shaped string built at run time (never one in a tracked file)."""
    alphabet = string.ascii_lowercase + string.digits
    return "sk-" + "".join(secrets.choice(alphabet) for _ in range(32))


def _everything_shown(error: BaseException) -> str:
    """str, repr and args of the error and its whole chain, and the formatted traceback."""
    out: list[str] = []
    seen: BaseException | None = error
    while seen is not None:
        out.extend([str(seen), repr(seen), repr(seen.args)])
        out.extend(repr(v) for v in vars(seen).values())
        seen = seen.__cause__ or seen.__context__
    out.append("".join(traceback.format_exception(error)))
    return "\n".join(out)


def _fragments(key: str) -> list[str]:
    """Any eight characters of the key would be a leak."""
    return [key[i : i + 8] for i in range(len(key) - 7)]


def _leaks(text: str, key: str) -> list[str]:
    return [f for f in _fragments(key) if f in text]


async def _drain(stream: AsyncIterator[Chunk], into: list[Chunk]) -> None:
    async for chunk in stream:
        into.append(chunk)


async def _fail(script: list[Response], settings_for: Callable[[str], ChatSettings]) -> ModelError:
    with ScriptedModelServer([script]) as server:
        async with ChatClient(settings_for(server.base_url)) as client:
            with pytest.raises(ModelError) as info:
                await _drain(client.stream(ModelRequest(session_id="s", messages=[])), [])
    return info.value


@pytest.mark.parametrize(
    "template",
    [
        "Your api key KEY is invalid",
        "x" * 4090 + "KEY is invalid",  # straddles the old 4,096-byte cut
        "x" * (64 * 1024 - 12) + "KEY",  # straddles today's read bound
        "<html><title>bad key KEY</title><body>KEY</body></html>",
        '{"error": {"message": "key KEY rejected", "code": "KEY"}}',
    ],
    ids=["plain", "old-cut", "read-bound", "html", "json-fields"],
)
async def test_http_error_bodies_echoing_the_key(
    template: str, make_settings: SettingsFactory
) -> None:
    key = _fake_key()
    error = await _fail(
        [Fault.status(401, body=template.replace("KEY", key))],
        lambda base: make_settings(base, api_key=SecretStr(key)),
    )
    assert error.code == "AUTH"
    assert _leaks(_everything_shown(error), key) == []


async def test_an_error_event_in_the_stream_echoing_the_key(
    make_settings: SettingsFactory,
) -> None:
    key, other = _fake_key(), _fake_key()
    event = f'data: {{"error": {{"message": "key {key} (also {other}) over quota"}}}}\n\n'
    text = 'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    error = await _fail(
        [Fault.raw([text, event])], lambda base: make_settings(base, api_key=SecretStr(key))
    )
    assert error.code == "SERVER"
    assert error.message == (
        f"Model API error (in stream): key {REDACTED} (also {REDACTED}) over quota"
    )
    shown = _everything_shown(error)
    assert _leaks(shown, key) == []
    assert _leaks(shown, other) == []  # any key-shaped token, not only ours


async def test_exception_chains_and_logs_hold_no_key(
    make_settings: SettingsFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "dsh_llm_openai", "tenacity"):
        caplog.set_level(logging.DEBUG, logger=name)
    key = _fake_key()
    errors: list[ModelError] = []
    script: list[Response] = [
        Fault.status(503, message=f"overloaded for {key}"),  # retried: logged as a warning
        Fault.status(401, message=f"bad key {key}"),
    ]
    with ScriptedModelServer([script, [Fault.drop_after(0)] * 2]) as server:
        settings = make_settings(server.base_url, api_key=SecretStr(key), max_retries=1)
        async with ChatClient(settings) as client:
            for session in ("a", "b"):
                try:
                    await _drain(client.stream(ModelRequest(session_id=session, messages=[])), [])
                except ModelError as exc:
                    errors.append(exc)
    assert [e.code for e in errors] == ["AUTH", "NETWORK"]
    for error in errors:
        # Raised outside any handler: no httpx error (whose request carries the
        # Authorization header) and no retry wrapper rides along.
        assert error.__cause__ is None
        assert error.__context__ is None
        assert _leaks(_everything_shown(error), key) == []
    assert any("retrying" in r.getMessage() for r in caplog.records)
    logged = "\n".join([caplog.text, *(repr(r.__dict__) for r in caplog.records)])
    assert _leaks(logged, key) == []


@pytest.mark.parametrize(
    ("text", "truncated", "expected"),
    [
        ("key KEY here", False, f"key {REDACTED} here"),
        ("cut at HALF", True, f"cut at {REDACTED}"),  # the read bound cut the key in two
        ("a bare sk- run", True, "a bare sk- run"),
        ("ends in sk-abc", True, f"ends in {REDACTED}"),
        ("ends in sk-abc", False, "ends in sk-abc"),  # too short to be a key when not cut
        ("sk-" + "A" * 16 + " and sk-short", False, f"{REDACTED} and sk-short"),
        ("no key at all", True, "no key at all"),
    ],
)
def test_redactor(text: str, truncated: bool, expected: str) -> None:
    key = _fake_key()
    redact = Redactor(SecretStr(key))
    text = text.replace("KEY", key).replace("HALF", key[: len(key) // 2])
    assert redact(text, truncated=truncated) == expected
    assert key not in repr(redact)


def test_redactor_cuts_a_prefix_of_a_key_of_any_shape() -> None:
    redact = Redactor(SecretStr("plain-secret-value-123"))
    assert redact("ends in plain-sec", truncated=True) == f"ends in {REDACTED}"
    assert redact("ends in plain-sec", truncated=False) == "ends in plain-sec"
    assert redact("ends in pla", truncated=True) == "ends in pla"  # under four characters

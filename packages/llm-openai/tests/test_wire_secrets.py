"""The API key reaches the Authorization header and nothing else we control."""

from __future__ import annotations

import logging
import pickle
import traceback
from collections.abc import Callable

import pytest

from dsh_core import Chunk, ModelError, ModelRequest
from dsh_llm_openai import ChatClient, ChatSettings
from dsh_scripted_server import Fault, ScriptedModelServer

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., ChatSettings]

OK: list[Chunk] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "fine"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "fine"}},
    {"type": "finish", "reason": {"kind": "stop"}},
]


def _error_texts(error: BaseException) -> list[str]:
    """Everything an error shows: str, repr, args, causes, and a formatted traceback."""
    out: list[str] = []
    seen: BaseException | None = error
    while seen is not None:
        out.extend([str(seen), repr(seen), repr(seen.args)])
        seen = seen.__cause__ or seen.__context__
    out.append("".join(traceback.format_exception(error)))
    # Locals of the library's frames (the test's own frame holds the key on purpose).
    tb = error.__traceback__
    while tb is not None:
        if "dsh_llm_openai" in tb.tb_frame.f_code.co_filename:
            out.extend(
                f"{tb.tb_frame.f_code.co_name}: {k}={v!r}" for k, v in tb.tb_frame.f_locals.items()
            )
        tb = tb.tb_next
    return out


async def test_key_never_leaks(
    server: ScriptedModelServer,
    make_settings: SettingsFactory,
    test_key: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "dsh_llm_openai", "tenacity"):
        caplog.set_level(logging.DEBUG, logger=name)
    # A server that echoes the key in its error message must not get it into ours.
    server.add_session(
        [
            Fault.status(500, message=f"internal error for key {test_key}"),
            OK,
            Fault.status(401, message=f"Authentication Fails, Your api key: {test_key} is invalid"),
            Fault.drop_after(1),
        ]
    )
    settings = make_settings(server.base_url)
    texts: list[str] = [
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        repr(settings.model_dump()),
    ]
    errors: list[ModelError] = []
    async with ChatClient(settings) as client:
        texts += [repr(client), str(client)]
        request = ModelRequest(session_id="k", messages=[])
        assert [c async for c in client.stream(request)] == OK
        for _ in range(2):
            try:
                _ = [c async for c in client.stream(request)]
            except ModelError as exc:
                errors.append(exc)
    assert [e.code for e in errors] == ["AUTH", "NETWORK"]
    assert "[redacted]" in errors[0].message
    for error in errors:
        texts += _error_texts(error)
        texts.append(repr(pickle.loads(pickle.dumps(error))))
    texts.append(caplog.text)
    texts += [repr(r.__dict__) for r in caplog.records]
    texts += [repr(r.body) for r in server.requests]
    assert caplog.records, "DEBUG logging was captured"
    assert all(r.authorized for r in server.requests)  # the key was sent …
    leaks = [t for t in texts if test_key in t]
    assert leaks == []  # … and is nowhere else


async def test_settings_repr_hides_the_key(make_settings: SettingsFactory, test_key: str) -> None:
    settings = make_settings("http://127.0.0.1:9")
    assert test_key not in repr(settings)
    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == test_key

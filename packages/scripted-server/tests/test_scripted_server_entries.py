"""The scripted server plays dsh_core's script entries over real HTTP, as every player does."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from dsh_core import (
    PARTIAL_TEXT,
    Chunk,
    ChunksEntry,
    HangEntry,
    ModelError,
    ModelRequest,
    ThrowEntry,
)
from dsh_llm_openai import ChatClient, ChatSettings
from dsh_scripted_server import ScriptedModelServer, ScriptError

pytestmark = pytest.mark.anyio

SettingsFactory = Callable[..., ChatSettings]

_TEXT: tuple[Chunk, ...] = (
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "hi"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hi"}},
    {"type": "finish", "reason": {"kind": "stop"}},
)


async def _collect(client: ChatClient[ChatSettings], session_id: str, into: list[Chunk]) -> None:
    async for chunk in client.stream(ModelRequest(session_id=session_id, messages=[])):
        into.append(chunk)


async def test_chunks_and_throw_entries_play_over_http(make_settings: SettingsFactory) -> None:
    script = [ChunksEntry(_TEXT), ThrowEntry((), "overloaded", "IGNORED", 503)]
    with ScriptedModelServer([script]) as server:
        settings = make_settings(server.base_url, max_retries=0)
        async with ChatClient(settings) as client:
            seen: list[Chunk] = []
            await _collect(client, "s", seen)
            assert [c["type"] for c in seen] == [c["type"] for c in _TEXT]
            with pytest.raises(ModelError) as failed:
                await _collect(client, "s", [])
    assert failed.value.status == 503
    assert "overloaded" in str(failed.value)
    server.assert_consumed()


async def test_hang_entry_streams_its_partial_text_then_stalls(
    make_settings: SettingsFactory,
) -> None:
    with ScriptedModelServer([[HangEntry()]]) as server:
        async with ChatClient(make_settings(server.base_url)) as client:
            seen: list[Chunk] = []
            with anyio.move_on_after(0.5) as scope:
                await _collect(client, "s", seen)
            assert scope.cancelled_caught
    assert seen[: len(PARTIAL_TEXT)] == list(PARTIAL_TEXT)
    server.assert_consumed()


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (ThrowEntry((), "no status", "X"), "4xx or 5xx status"),
        (ThrowEntry((), "not an error", "X", 200), "4xx or 5xx status"),
        (HangEntry(".ready"), "ready_file is a replay marker"),
        (ChunksEntry(({"type": "nope"},)), "sessions[0][0].chunks[0].type"),  # pyright: ignore[reportArgumentType]
    ],
)
def test_entries_http_cannot_play_are_refused(entry: object, reason: str) -> None:
    with pytest.raises(ScriptError, match="sessions\\[0\\]\\[0\\]") as refused:
        ScriptedModelServer([[entry]])  # pyright: ignore[reportArgumentType]
    assert reason in str(refused.value)

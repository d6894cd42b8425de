"""Round trip: recorded chunk lists → scripted server → ChatClient → the same chunks.

The snapshot tier relies on this: a script derived from a recording, served by the scripted
server, must come back out of the real client exactly as it was recorded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

import pytest

from dsh_core import Chunk, ModelError, ModelRequest
from dsh_core.testing import corpus_unavailable, upstream_corpus
from dsh_llm_openai import ChatClient, ChatSettings
from dsh_scripted_server import ScriptedModelServer

SettingsFactory = Callable[..., ChatSettings]

# The path setting of the compatibility corpus (DESIGN §9): DSH_UPSTREAM_CORPUS, defaulting to
# ../shared/upstream-corpus next to the checkout.
CORPUS = upstream_corpus(__file__) or Path("upstream-corpus (not found)")
JUNE = CORPUS / "june"


def _groups(path: Path) -> list[list[Chunk]]:
    """The assistant/chunk chunks of one log, one list per (turn, step) in log order."""
    groups: dict[tuple[int, int], list[Chunk]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        event = cast(dict[str, Any], json.loads(line))
        if event.get("type") == "assistant/chunk":
            data = cast(dict[str, Any], event["data"])
            groups.setdefault((data["turn"], data["step"]), []).append(cast(Chunk, data["chunk"]))
    return list(groups.values())


async def drain(stream: AsyncIterator[Chunk], into: list[Chunk]) -> None:
    async for chunk in stream:
        into.append(chunk)


def _logs() -> list[Path]:
    return sorted(JUNE.glob("*/session*.jsonl")) if JUNE.is_dir() else []


@pytest.mark.corpus
@pytest.mark.anyio
@pytest.mark.parametrize(
    "log",
    _logs() or [None],
    ids=lambda p: "none" if p is None else f"{p.parent.name}/{p.name}",
)
async def test_june_chunk_lists_round_trip(
    log: Path | None, make_settings: SettingsFactory
) -> None:
    if log is None:
        corpus_unavailable(f"upstream corpus not found at {JUNE}")
    groups = _groups(log)
    if not groups:
        pytest.skip(f"{log} has no assistant/chunk events")
    with ScriptedModelServer() as server:
        server.add_session(groups)
        async with ChatClient(make_settings(server.base_url, max_retries=0)) as client:
            for step, expected in enumerate(groups, 1):
                request = ModelRequest(
                    session_id=f"replayed-{log.parent.name}", messages=[], step=step
                )
                got: list[Chunk] = []
                if expected[-1]["type"] == "finish":
                    got = [c async for c in client.stream(request)]
                else:
                    # A recording cut off before its finish (a cancelled turn): the client
                    # yields the same prefix, then reports the stream as incomplete.
                    with pytest.raises(ModelError) as info:
                        await drain(client.stream(request), got)
                    assert info.value.code == "PROTOCOL"
                assert got == expected
                assert [json.dumps(c) for c in got] == [json.dumps(c) for c in expected]
        server.assert_consumed()

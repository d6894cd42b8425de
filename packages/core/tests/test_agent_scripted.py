"""``ScriptedModel``, the agent's in-process model double, and ``derive_replay_script``."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from dsh_core import (
    Chunk,
    ChunksEntry,
    Event,
    HangEntry,
    ModelClient,
    ModelError,
    ModelRequest,
    ThrowEntry,
    UnterminatedCallError,
    derive_replay_script,
)
from dsh_core.testing import ScriptedModel, ScriptError

pytestmark = pytest.mark.anyio

_A: list[Chunk] = [{"type": "finish", "reason": {"kind": "stop"}}]
_B: list[Chunk] = [{"type": "block-start", "index": 0, "blockType": "text"}, *_A]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _call(model: ScriptedModel, session_id: str) -> list[Chunk]:
    return [chunk async for chunk in model.stream(ModelRequest(session_id, []))]


async def test_sessions_claim_scripts_in_order_and_keep_their_own_cursor() -> None:
    model = ScriptedModel([[_A, _B], [_B]])
    assert isinstance(model, ModelClient)
    assert await _call(model, "p") == _A
    assert await _call(model, "c") == _B
    assert await _call(model, "p") == _B
    assert model.calls_by_session() == {"p": 2, "c": 1}
    assert [r.session_id for r in model.requests] == ["p", "c", "p"]
    model.assert_consumed()
    await model.aclose()
    assert model.closed


async def test_explicit_ids_win_over_order() -> None:
    model = ScriptedModel([[_A]], by_id={"x": [_B]})
    assert await _call(model, "x") == _B
    assert await _call(model, "y") == _A


async def test_exhaustion_and_unbound_sessions_are_errors() -> None:
    model = ScriptedModel([[_A]])
    await _call(model, "p")
    with pytest.raises(
        ScriptError, match=r"^session p \(script #1\) made call 2 but its script has 1 entries$"
    ):
        await _call(model, "p")
    with pytest.raises(
        ScriptError,
        match=r"^session q made a model call but all 1 scripts are already bound: "
        r"#1 -> p$",
    ):
        await _call(model, "q")


async def test_assert_consumed_names_every_shortfall() -> None:
    model = ScriptedModel([[_A, _A], [_A], []], by_id={"z": [_A]})
    await _call(model, "p")
    with pytest.raises(ScriptError) as caught:
        model.assert_consumed()
    # an empty script (#3) needs no session, so it is no shortfall
    assert str(caught.value) == (
        "script #2 (1 calls) was never bound to a live session; "
        "session z (script for z) made 0 of 1 recorded calls; "
        "session p (script #1) made 1 of 2 recorded calls"
    )


async def test_errors_are_raised_after_their_chunks() -> None:
    model = ScriptedModel(
        [
            [
                ThrowEntry((), "boom", "X"),
                ThrowEntry(tuple(_B[:1]), "late", "Y", 503),
                ChunksEntry(tuple(_A)),
            ]
        ]
    )
    seen: list[Chunk] = []

    async def drain() -> None:
        async for chunk in model.stream(ModelRequest("p", [])):
            seen.append(chunk)

    with pytest.raises(ModelError, match="boom") as first:
        await drain()
    assert (first.value.code, first.value.status, seen) == ("X", None, [])
    with pytest.raises(ModelError, match="late") as second:
        await drain()
    assert (second.value.code, second.value.status, seen) == ("Y", 503, _B[:1])
    assert await _call(model, "p") == _A
    model.assert_consumed()


async def test_hang_yields_then_waits_for_cancellation() -> None:
    model = ScriptedModel([[HangEntry()]])
    seen: list[Chunk] = []
    with anyio.move_on_after(0.05) as scope:
        async for chunk in model.stream(ModelRequest("p", [])):
            seen.append(chunk)
    assert scope.cancelled_caught
    assert seen == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "partial"},
    ]


def _chunk(seq: int, turn: int, step: int, kind: str) -> Event:
    return Event("assistant/chunk", seq, 0, {"turn": turn, "step": step, "chunk": {"type": kind}})


def test_derive_replay_script_closes_a_call_at_each_finish() -> None:
    # Two calls in one step (an empty-response retry) are two entries, not one per step.
    events: Sequence[Event] = [
        _chunk(0, 1, 1, "block-start"),
        _chunk(1, 1, 1, "finish"),
        _chunk(2, 1, 1, "usage"),
        _chunk(3, 1, 1, "finish"),
        Event("step/end", 4, 0, {}),
        _chunk(5, 1, 2, "finish"),
    ]
    assert derive_replay_script(events) == [
        ChunksEntry(({"type": "block-start"}, {"type": "finish"})),  # pyright: ignore[reportArgumentType]
        ChunksEntry(({"type": "usage"}, {"type": "finish"})),  # pyright: ignore[reportArgumentType]
        ChunksEntry(({"type": "finish"},)),  # pyright: ignore[reportArgumentType]
    ]


@pytest.mark.parametrize(
    ("events", "cut"),
    [
        ([_chunk(0, 1, 1, "text-delta"), _chunk(1, 1, 2, "finish")], "turn 1, step 2 began"),
        ([_chunk(0, 2, 1, "finish"), _chunk(1, 2, 2, "text-delta")], "the end of the log"),
    ],
)
def test_derive_replay_script_refuses_a_call_without_finish(
    events: Sequence[Event], cut: str
) -> None:
    with pytest.raises(
        UnterminatedCallError, match=f"recorded 1 chunk\\(s\\) but no finish chunk before {cut}"
    ) as caught:
        derive_replay_script(events, "log.jsonl")
    assert caught.value.source == "log.jsonl"
    assert "replay.override.json" in str(caught.value)

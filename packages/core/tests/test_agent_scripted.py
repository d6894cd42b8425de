"""``ScriptedModel`` and ``chunk_groups``, the agent's in-process model double."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from dsh_core import Chunk, Event, ModelClient, ModelError, ModelRequest
from dsh_core.testing import Hang, Raise, ScriptedModel, ScriptError, chunk_groups

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
    with pytest.raises(ScriptError, match=r"script #1 \(session p\) has 1 entries; call 2"):
        await _call(model, "p")
    with pytest.raises(ScriptError, match="session q called the model but every one of the 1"):
        await _call(model, "q")


async def test_assert_consumed_names_every_shortfall() -> None:
    model = ScriptedModel([[_A, _A], [_A]], by_id={"z": [_A]})
    await _call(model, "p")
    with pytest.raises(ScriptError) as caught:
        model.assert_consumed()
    assert str(caught.value) == (
        "script #2 was never bound to a session; script for z (session z) played 0 of 1 "
        "entries; script #1 (session p) played 1 of 2 entries"
    )


async def test_errors_are_raised_after_their_chunks() -> None:
    error = ModelError("boom", code="X")
    model = ScriptedModel([[error, Raise(error, _B[:1]), Raise(KeyError("k"))]])
    seen: list[Chunk] = []

    async def drain() -> None:
        async for chunk in model.stream(ModelRequest("p", [])):
            seen.append(chunk)

    for _ in range(2):
        with pytest.raises(ModelError, match="boom"):
            await drain()
    assert seen == _B[:1]
    with pytest.raises(KeyError):
        await _call(model, "p")


async def test_hang_yields_then_waits_for_cancellation() -> None:
    model = ScriptedModel([[Hang()]])
    seen: list[Chunk] = []
    with anyio.move_on_after(0.05) as scope:
        async for chunk in model.stream(ModelRequest("p", [])):
            seen.append(chunk)
    assert scope.cancelled_caught
    assert seen == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "partial"},
    ]


def test_chunk_groups_split_by_turn_and_step() -> None:
    def chunk(seq: int, turn: int, step: int, kind: str) -> Event:
        return Event(
            "assistant/chunk", seq, 0, {"turn": turn, "step": step, "chunk": {"type": kind}}
        )

    events: Sequence[Event] = [
        chunk(0, 1, 1, "a"),
        chunk(1, 1, 1, "b"),
        Event("step/end", 2, 0, {}),
        chunk(3, 1, 2, "c"),
        chunk(4, 2, 1, "d"),
    ]
    assert chunk_groups(events) == [
        [{"type": "a"}, {"type": "b"}],
        [{"type": "c"}],
        [{"type": "d"}],
    ]

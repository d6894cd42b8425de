"""Upstream's ``llm-deepseek/tests/sse.spec.ts`` (June 2026): server-sent-event parsing, as
conformance cases for our reader — httpx's line decoding of the response bytes (what the client
reads with ``aiter_lines``) and :func:`sse_data`. Fragments are network reads. Ledger:
COMPATIBILITY.md § "Upstream unit tests".

Upstream ends a stream at ``[DONE]`` and calls a stream without it ``STREAM_CLOSED``; ours
ends it at ``[DONE]`` or at the body's end once a ``finish_reason`` arrived, and a body that
ends before one is a ``PROTOCOL`` error (``test_wire_retries.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from dsh_llm_openai._stream import DONE, sse_data

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _reads(fragments: tuple[bytes, ...]) -> AsyncIterator[bytes]:
    for fragment in fragments:
        yield fragment


async def _events(*fragments: str | bytes) -> list[str]:
    reads = tuple(f.encode() if isinstance(f, str) else f for f in fragments)
    response = httpx.Response(200, content=_reads(reads))
    return [data async for data in sse_data(response.aiter_lines())]


_JAPANESE = 'data: {"text":"日本語"}\n\ndata: [DONE]\n\n'.encode()

CASES: list[tuple[str, tuple[str | bytes, ...], list[str]]] = [
    (
        "parses simple events and the DONE sentinel",
        ('data: {"a":1}\n\ndata: [DONE]\n\n',),
        ['{"a":1}', DONE],
    ),
    (
        "handles events split across reads at arbitrary positions",
        ("da", 'ta: {"a"', ":1}\n", "\ndata: [DO", "NE]\n\n"),
        ['{"a":1}', DONE],
    ),
    (
        "handles multi-byte UTF-8 split across reads",
        (_JAPANESE[:16], _JAPANESE[16:]),
        ['{"text":"日本語"}', DONE],
    ),
    (
        "tolerates CRLF line endings",
        ('data: {"a":1}\r\n\r\ndata: [DONE]\r\n\r\n',),
        ['{"a":1}', DONE],
    ),
    (
        "joins multi-data events with newlines (SSE spec)",
        ("data: line1\ndata: line2\n\ndata: [DONE]\n\n",),
        ["line1\nline2", DONE],
    ),
    (
        "ignores comments and non-data fields",
        (': keepalive\nevent: chunk\nid: 7\ndata: {"a":1}\n\ndata: [DONE]\n\n',),
        ['{"a":1}', DONE],
    ),
    (
        "skips blocks without data fields",
        (': ping\n\ndata: {"a":1}\n\ndata: [DONE]\n\n',),
        ['{"a":1}', DONE],
    ),
    (
        "preserves data lines without the optional space",
        ('data:{"a":1}\n\ndata:[DONE]\n\n',),
        ['{"a":1}', DONE],
    ),
    (
        "parses several events from one read",
        ("data: 1\n\ndata: 2\n\ndata: [DONE]\n\n",),
        ["1", "2", DONE],
    ),
    (
        "flushes a final un-terminated DONE at stream end",
        ('data: {"a":1}\n\ndata: [DONE]',),
        ['{"a":1}', DONE],
    ),
    (
        "handles a lone CR-terminated data line",
        ('data: {"a":1}\r\n\r\ndata:[DONE]\r\n\r\n',),
        ['{"a":1}', DONE],
    ),
    (
        "strips CR from non-data field lines too",
        ('event: chunk\r\ndata: {"a":1}\n\ndata: [DONE]\n\n',),
        ['{"a":1}', DONE],
    ),
    (
        "treats bare 'data:' lines as empty payload entries",
        ("data:\ndata: x\n\ndata: [DONE]\n\n",),
        ["\nx", DONE],
    ),
]


@pytest.mark.parametrize(("case", "fragments", "events"), CASES, ids=[c[0] for c in CASES])
async def test_parse_sse(case: str, fragments: tuple[str | bytes, ...], events: list[str]) -> None:
    assert await _events(*fragments) == events, case


async def test_nothing_after_done_is_read_as_an_event_of_the_stream() -> None:
    # the client stops at the first DONE (``_next`` returns done); what follows is never fed
    events = await _events('data: [DONE]\n\ndata: {"late":1}\n\n')
    assert events[: events.index(DONE) + 1] == [DONE]

"""``parse_session_log`` reads through core's one-pass reader: it must equal the line reader.

The fast path checks common rows inline instead of calling ``event_from_json``; these tests
keep the two in step on every corpus log and every entry of core's damaged-log catalogue.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core import LogFormatError, read_log
from dsh_core.testing import DAMAGED_LOGS, DamagedLog
from dsh_llm_replay import parse_session_log


@pytest.mark.corpus
def test_replay_reader_equals_the_line_reader_on_the_corpus(corpus: Path) -> None:
    paths = sorted(corpus.glob("*/*/session*.jsonl"))
    assert len(paths) > 50
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert parse_session_log(text, str(path)) == read_log(text.split("\n"), str(path)).events


@pytest.mark.parametrize("damaged", DAMAGED_LOGS, ids=[d.id for d in DAMAGED_LOGS])
def test_replay_reader_refuses_every_damaged_log_like_the_line_reader(
    damaged: DamagedLog,
) -> None:
    try:
        text = damaged.data.decode("utf-8")
    except UnicodeDecodeError:
        pytest.skip("not UTF-8: refused before parsing (load_session_scripts reads bytes)")
    with pytest.raises(LogFormatError) as line_reader:
        read_log(text.split("\n"), "d.jsonl")
    with pytest.raises(LogFormatError) as fast:
        parse_session_log(text, "d.jsonl")
    assert (fast.value.line, fast.value.field) == (damaged.line, damaged.field)
    assert str(fast.value) == str(line_reader.value)


VARIANTS: dict[str, Callable[[str], str]] = {
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "leading-blank": lambda t: "\n" + t,
    "blank-lines": lambda t: t.replace("\n", "\n\n", 3),
    "no-final-newline": lambda t: t.rstrip("\n"),
    "leading-space": lambda t: t.replace('{"type"', ' {"type"'),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_replay_reader_tolerates_what_the_line_reader_tolerates(
    variant: str,
) -> None:
    text = (
        '{"type":"session","version":0,"id":"s","createdAt":1}\n'
        '{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}\n'
        '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"finish"}}}\n'
        '{"type":"x/y","seq":2,"time":0,"data":{},"surfaceOp":"append"}\n'
    )
    changed = VARIANTS[variant](text)
    assert parse_session_log(changed) == read_log(changed.split("\n")).events
    assert len(parse_session_log(changed)) == 3

"""The fast line encoder writes exactly what the generic JSON encoder writes, and refuses
exactly what it refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_core import (
    Event,
    dumps_event,
    dumps_event_lines,
    dumps_json,
    read_log_text,
)
from dsh_core.testing import corpus_unavailable, synthetic_turn, upstream_corpus

_CORPUS = upstream_corpus(__file__)


def _generic(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class _Seq(int):
    """An int subclass: the generic encoder writes it through ``int.__repr__``."""

    def __str__(self) -> str:
        return "not-a-number"

    __format__ = None  # type: ignore[assignment]  # an f-string would raise, not mis-write


_AWKWARD: list[Any] = [
    {"text": 'quote " backslash \\ newline \n tab \t nul \x00 del \x7f'},
    {"text": "non-ASCII é ✓ 😀 and U+2028 \u2028 U+2029 \u2029"},
    {"floats": [0.1, 1e16, 1e-07, -0.0, 1.5, 123456789.123456789, 2.0**70]},
    {"ints": [0, -1, 2**63, -(2**70)], "bools": [True, False], "none": None},
    {"nested": {"a": [{"b": [[], {}]}], "": ""}, 1: "int key", None: "null key"},
    {"tuple": (1, "two")},
    [],
    "a bare string",
    3,
]


@pytest.mark.parametrize("value", _AWKWARD, ids=range(len(_AWKWARD)))
def test_dumps_json_matches_the_generic_encoder(value: Any) -> None:
    assert dumps_json(value) == _generic(value)


def _events() -> list[Event]:
    plain = synthetic_turn(0, 7)
    surface = [
        Event("assistant/message", 100, 5, {"x": 1}, surface_op="append"),
        Event(
            "assistant/message",
            101,
            6,
            {"x": 2},
            surface_op={"op": "replace", "start": 0, "end": 3},
            source_event_seqs=[4, 5],
        ),
        Event("later/kind", 102, 7, {"y": [1.5]}, source_event_seqs=[]),
        # unknown envelope keys, one of them shadowing a known one: the dict decides
        Event("x/y", 103, 8, {}, extra={"future": {"k": "v"}, "seq": 999}),
        Event("x/y", _Seq(104), 9, {"n": "seq is an int subclass"}),
        Event("x/y", 105, True, {"n": "time is a bool"}),  # pyright: ignore[reportArgumentType]
        Event('tÿpe "quoted"\n', 106, 10, _AWKWARD[0]),
    ]
    return [*plain, *surface]


@pytest.mark.parametrize("event", _events(), ids=range(len(_events())))
def test_dumps_event_matches_the_generic_encoder_of_the_envelope(event: Event) -> None:
    assert dumps_event(event) == _generic(event.to_json())


def test_dumps_event_lines_is_every_line_newline_terminated_in_utf8() -> None:
    events = _events()
    expected = "".join(_generic(e.to_json()) + "\n" for e in events).encode("utf-8")
    assert dumps_event_lines(events) == expected
    assert dumps_event_lines([]) == b""


@pytest.mark.corpus
def test_every_upstream_corpus_event_encodes_as_the_generic_encoder_does() -> None:
    if _CORPUS is None:
        corpus_unavailable("no upstream corpus found (set DSH_UPSTREAM_CORPUS)")
    logs = sorted(_CORPUS.glob("*/*/session.jsonl"))
    assert logs, f"no session logs under {_CORPUS}"
    checked = 0
    for path in logs:
        for event in read_log_text(path.read_text("utf-8"), str(path)).events:
            assert dumps_event(event) == _generic(event.to_json()), f"{path}: seq {event.seq}"
            checked += 1
    assert checked > 1000


def _circular() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (float("nan"), "Out of range float values are not JSON compliant"),
        ({"inf": float("-inf")}, "Out of range float values are not JSON compliant"),
        ({"set": {1, 2}}, "Object of type set is not JSON serializable"),
        ({"bytes": b"x"}, "Object of type bytes is not JSON serializable"),
        ({"fn": len}, "Object of type builtin_function_or_method is not JSON serializable"),
        (_circular(), "Circular reference detected"),
        (_deep(100_000), "nested deeper than the recursion limit"),
    ],
    ids=["nan", "infinity", "set", "bytes", "function", "circular", "too-deep"],
)
def test_values_json_cannot_hold_are_refused_naming_the_event(value: Any, reason: str) -> None:
    with pytest.raises((TypeError, ValueError), match=reason):
        dumps_json(value)
    event = Event("tool/result", 12, 0, {"value": value})
    with pytest.raises(ValueError, match=r"event 'tool/result' at seq 12 carries data that is not"):
        dumps_event(event)
    with pytest.raises(ValueError, match=r"at seq 12"):
        dumps_event_lines([*synthetic_turn(0, 1)[:2], event])
    surface = Event("x", 3, 0, {}, surface_op={"bad": float("nan")})
    with pytest.raises(ValueError, match=r"event 'x' at seq 3 carries data that is not JSON"):
        dumps_event(surface)


def test_a_lone_surrogate_cannot_become_utf8_and_nothing_is_returned() -> None:
    event = Event("user/message", 0, 0, {"text": "\ud800"})
    assert dumps_event(event) == _generic(event.to_json())  # text: the encoder keeps it
    with pytest.raises(UnicodeEncodeError):
        dumps_event_lines([event])

"""Request drift: the live request's header against the one the recording was made with.

A recorded log's ``request/header`` events say which provider, model, sampling settings,
system prompt and tools each call was made with. Replay feeds the recorded chunks whatever
the agent now asks, so without this check a changed prompt, tool description or model would
replay green against a stale recording. Recordings without a header (the June era) and
upstream's logs, which normalise the prompt and tools to placeholders, cannot be checked, and
:attr:`RecordedHeaders.note` says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from dsh_core import REQUEST_HEADER_EVENT, Event

__all__ = [
    "NOT_RECORDED",
    "HeaderDifference",
    "HeaderStatus",
    "RecordedHeaders",
    "around_difference",
    "first_header_difference",
    "recorded_headers",
]

HeaderStatus = Literal["recorded", "not-recorded", "normalised"]

_NOTES: dict[HeaderStatus, str] = {
    "recorded": "request header: checked",
    "not-recorded": "request header: not recorded (june-era), not checked",
    "normalised": "request header: normalised by upstream ({{system}}, {{tools}}), not checked",
}
_PLACEHOLDER = re.compile(r"^\{\{[^{}]*\}\}$")
_SHOWN = 100  # characters of a value shown on each side of a difference


@dataclass(frozen=True, slots=True)
class RecordedHeaders:
    """The headers a recorded session's calls were made with.

    Attributes:
        status: ``recorded`` (checked), ``not-recorded`` (no ``request/header``: the June
            era) or ``normalised`` (upstream's placeholders stand for the prompt and tools).
        by_step: the header in effect at each recorded ``(turn, step)``'s ``step/start``.
        last: the last header of the log (for a step the recording does not have).
        calls: the header in effect at each recorded call's ``finish``, in call order (for a
            caller that counts calls rather than steps, as the proxy does).
    """

    status: HeaderStatus
    by_step: Mapping[tuple[int, int], Mapping[str, Any]] = field(
        default_factory=dict[tuple[int, int], Mapping[str, Any]]
    )
    last: Mapping[str, Any] | None = None
    calls: tuple[Mapping[str, Any] | None, ...] = ()

    @property
    def note(self) -> str:
        """One line for a report: whether and why the header is (not) checked."""
        return _NOTES[self.status]

    def at(self, turn: int, step: int) -> Mapping[str, Any] | None:
        """The header the recorded call of ``(turn, step)`` was made with (``None``: the
        recording has no checkable header)."""
        if self.status != "recorded":
            return None
        header = self.by_step.get((turn, step))
        return header if header is not None else self.last

    def for_call(self, number: int) -> Mapping[str, Any] | None:
        """The header recorded call ``number`` (1-based) was made with (``None``: none to
        check, or no such call)."""
        if self.status != "recorded" or not 1 <= number <= len(self.calls):
            return None
        return self.calls[number - 1]


NOT_RECORDED = RecordedHeaders("not-recorded")
"""A recording without ``request/header`` events (the June era)."""


def _is_normalised(header: Mapping[str, Any]) -> bool:
    return any(
        isinstance(value, str) and _PLACEHOLDER.match(value) is not None
        for value in (header.get("system"), header.get("tools"))
    ) or not isinstance(header.get("tools", []), list)


def recorded_headers(events: Iterable[Event]) -> RecordedHeaders:
    """Fold a session's own events (after its ``seedLength``) into its recorded headers."""
    current: Mapping[str, Any] | None = None
    by_step: dict[tuple[int, int], Mapping[str, Any]] = {}
    calls: list[Mapping[str, Any] | None] = []
    seen = normalised = False
    for event in events:
        if event.type == REQUEST_HEADER_EVENT:
            header = event.data.get("header")
            if isinstance(header, dict):
                current = cast(dict[str, Any], header)
                seen = True
                normalised = normalised or _is_normalised(current)
        elif event.type in ("step/start", "assistant/chunk") and current is not None:
            turn, step = event.data.get("turn"), event.data.get("step")
            if isinstance(turn, int) and isinstance(step, int):
                # upstream logs the header after step/start; the step's first chunk settles it
                by_step[(turn, step)] = current
        if event.type == "assistant/chunk" and _is_finish(event.data.get("chunk")):
            calls.append(current)
    if not seen:
        return NOT_RECORDED
    if normalised:
        return RecordedHeaders("normalised")
    return RecordedHeaders("recorded", by_step, current, tuple(calls))


def _is_finish(chunk: Any) -> bool:
    return isinstance(chunk, dict) and cast(dict[str, Any], chunk).get("type") == "finish"


@dataclass(frozen=True, slots=True)
class HeaderDifference:
    """The first field where two headers differ.

    Attributes:
        path: where, e.g. ``tools[bash].parameters.properties.command.description`` (tools
            are indexed by name, other lists by position).
        expected: the recorded value, shown readably (long strings around the difference).
        actual: the live value, shown the same way.
    """

    path: str
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"{self.path}: expected {self.expected}, actual {self.actual}"


_ABSENT = object()


def first_header_difference(
    expected: Mapping[str, Any], actual: Mapping[str, Any]
) -> HeaderDifference | None:
    """The first differing field of two request headers (``config``, ``system``, ``tools``
    first, then any other key), or ``None`` when they are equal."""
    return _diff(expected, actual, "")


def _diff(expected: Any, actual: Any, path: str) -> HeaderDifference | None:
    if expected == actual:
        return None
    if isinstance(expected, dict) and isinstance(actual, dict):
        exp, act = cast(dict[str, Any], expected), cast(dict[str, Any], actual)
        keys = _ordered_keys(exp, act)
        for key in keys:
            if (
                path == ""
                and key == "tools"
                and _named_list(exp.get(key))
                and _named_list(act.get(key))
            ):
                found = _diff_tools(exp[key], act[key])
            else:
                found = _diff(exp.get(key, _ABSENT), act.get(key, _ABSENT), _join(path, key))
            if found is not None:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        exp_list, act_list = cast(list[Any], expected), cast(list[Any], actual)
        for index, (e, a) in enumerate(zip(exp_list, act_list, strict=False)):
            found = _diff(e, a, f"{path}[{index}]")
            if found is not None:
                return found
        return HeaderDifference(
            path or "(header)", f"{len(exp_list)} items", f"{len(act_list)} items"
        )
    if isinstance(expected, str) and isinstance(actual, str):
        return HeaderDifference(path or "(header)", *around_difference(expected, actual))
    return HeaderDifference(path or "(header)", _show(expected), _show(actual))


def _ordered_keys(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    first = [k for k in ("config", "provider", "model", "system", "tools") if k in expected]
    first += [k for k in ("config", "provider", "model", "system", "tools") if k in actual]
    rest = [*expected, *actual]
    return list(dict.fromkeys([*first, *rest]))


def _tool_name(item: Any) -> str | None:
    """A tool's name: ours (``{name, …}``) or the OpenAI wire's (``{function: {name}}``)."""
    if not isinstance(item, dict):
        return None
    tool = cast(dict[str, Any], item)
    function = tool.get("function")
    if "name" not in tool and isinstance(function, dict):
        tool = cast(dict[str, Any], function)
    name = tool.get("name")
    return name if isinstance(name, str) else None


def _named_list(value: Any) -> bool:
    if not isinstance(value, list):
        return False
    names = [_tool_name(item) for item in cast(list[Any], value)]
    return None not in names and len(set(names)) == len(names)


def _diff_tools(expected: list[Any], actual: list[Any]) -> HeaderDifference | None:
    exp = {cast(str, _tool_name(t)): cast(dict[str, Any], t) for t in expected}
    act = {cast(str, _tool_name(t)): cast(dict[str, Any], t) for t in actual}
    for name, tool in exp.items():
        if name not in act:
            return HeaderDifference(f"tools[{name}]", "a tool named " + name, "no such tool")
        found = _diff(tool, act[name], f"tools[{name}]")
        if found is not None:
            return found
    for name in act:
        if name not in exp:
            return HeaderDifference(f"tools[{name}]", "no such tool", "a tool named " + name)
    # Same tools, same definitions: only the order the model is told them differs.
    return HeaderDifference("tools", _names(exp), _names(act))


def _names(tools: Mapping[str, Any]) -> str:
    return "the order " + ", ".join(tools)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 2 * _SHOWN else text[: 2 * _SHOWN] + "…"


def around_difference(expected: str, actual: str) -> tuple[str, str]:
    """Both strings quoted, each cut to the neighbourhood of their first differing character
    (with ``(char N)``, its position), so that two long texts that share a prefix do not print
    the same text twice; short strings are shown whole."""
    if len(expected) <= 2 * _SHOWN and len(actual) <= 2 * _SHOWN:
        return _show(expected), _show(actual)
    at = next(
        (i for i, (e, a) in enumerate(zip(expected, actual, strict=False)) if e != a),
        min(len(expected), len(actual)),
    )
    start = max(at - _SHOWN // 2, 0)

    def cut(text: str) -> str:
        part = text[start : start + _SHOWN]
        lead = "…" if start > 0 else ""
        tail = "…" if start + _SHOWN < len(text) else ""
        return f"{lead}{json.dumps(part, ensure_ascii=False)}{tail} (char {at})"

    return cut(expected), cut(actual)

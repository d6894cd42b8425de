"""Comparison of normalised fixtures, and the diff that names the first difference.

A failure message reads ``session.1.jsonl line 14, field data.chunk.text: expected "a",
actual "b"`` so the reader can open the file at the line and see the field at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dsh_llm_replay import around_difference

__all__ = ["Difference", "first_difference"]

_MAX_SHOWN = 160


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


@dataclass(frozen=True, slots=True)
class Difference:
    """The first place where an expected fixture and the actual output differ.

    Attributes:
        file: the fixture's file name (``session.jsonl``, ``stdout.expected.jsonl``…).
        line: 1-based line in the normalised fixture (the header is line 1 of a log).
        field: dotted JSON path inside the line (``data.chunk.text``; ``""`` for the whole line).
        expected: the expected value (``None`` with ``missing`` when the line does not exist).
        actual: the actual value.
        detail: a short note (``"line missing in actual"``…), or ``""``.
    """

    file: str
    line: int
    field: str
    expected: Any
    actual: Any
    detail: str = ""

    def __str__(self) -> str:
        where = f"{self.file} line {self.line}"
        if self.field:
            where += f", field {self.field}"
        if self.detail:
            return f"{where}: {self.detail}"
        expected, actual = _pair(self.expected, self.actual)
        return f"{where}: expected {expected}, actual {actual}"


def _pair(expected: Any, actual: Any) -> tuple[str, str]:
    """Both values shown; two long texts around their first differing character, so that a
    shared prefix is not all either side shows."""
    if isinstance(expected, str) and isinstance(actual, str):
        return around_difference(expected, actual)
    return _show(expected), _show(actual)


def _field_diff(expected: Any, actual: Any, path: str) -> tuple[str, Any, Any, str] | None:
    if type(expected) is not type(actual):
        return (path, expected, actual, "")
    if isinstance(expected, dict):
        exp: dict[str, Any] = expected  # pyright: ignore[reportUnknownVariableType]
        act: dict[str, Any] = actual
        for key, value in exp.items():
            sub = f"{path}.{key}" if path else key
            if key not in act:
                return (sub, value, None, f"expected {_show(value)}, actual: field missing")
            found = _field_diff(value, act[key], sub)
            if found:
                return found
        for key, value in act.items():
            if key not in exp:
                sub = f"{path}.{key}" if path else key
                return (sub, None, value, f"unexpected field, actual {_show(value)}")
        return None
    if isinstance(expected, list):
        exp_list: list[Any] = expected  # pyright: ignore[reportUnknownVariableType]
        act_list: list[Any] = actual
        for index, (e, a) in enumerate(zip(exp_list, act_list, strict=False)):
            found = _field_diff(e, a, f"{path}[{index}]")
            if found:
                return found
        if len(exp_list) != len(act_list):
            return (
                path,
                exp_list,
                act_list,
                f"expected {len(exp_list)} items, actual {len(act_list)}",
            )
        return None
    if expected != actual:
        return (path, expected, actual, "")
    return None


def first_difference(file: str, expected: list[Any], actual: list[Any]) -> Difference | None:
    """The first differing line and field of two normalised fixtures, or ``None`` if equal."""
    for index, (e, a) in enumerate(zip(expected, actual, strict=False)):
        found = _field_diff(e, a, "")
        if found is not None:
            path, exp, act, detail = found
            return Difference(file, index + 1, path, exp, act, detail)
    if len(expected) > len(actual):
        line = len(actual) + 1
        return Difference(
            file,
            line,
            "",
            expected[len(actual)],
            None,
            f"line missing in actual (expected {len(expected)} lines, actual "
            f"{len(actual)}); expected {_show(expected[len(actual)])}",
        )
    if len(actual) > len(expected):
        line = len(expected) + 1
        return Difference(
            file,
            line,
            "",
            None,
            actual[len(expected)],
            f"extra line in actual (expected {len(expected)} lines, actual "
            f"{len(actual)}); actual {_show(actual[len(expected)])}",
        )
    return None

"""JSON with a nesting limit: deep input is a typed error, never a crash.

``json.loads`` recurses in C once per level and raises ``RecursionError`` past the
interpreter's limit (a 100,000-deep ``[[[…]]]`` line crashed the agent, ``show`` and the gate);
a document just under that limit then crashes whatever Python code walks it. Every reader of
untrusted JSON (the agent's stdin, scenario files, session logs) goes through
:func:`loads_bounded`: nesting deeper than ``MAX_JSON_DEPTH`` raises :class:`JsonDepthError`,
a ``ValueError`` as a syntax error is, so a caller that handles bad JSON handles this too.
The depth is counted only when the text holds that many brackets (one ``str.count``), so an
ordinary line costs one extra scan in C.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dsh_core._errors import DshError

__all__ = ["MAX_JSON_DEPTH", "JsonDepthError", "json_depth", "loads_bounded"]

MAX_JSON_DEPTH = 200
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class JsonDepthError(DshError, ValueError):
    """A JSON text nests deeper than the limit; the message says how deep may go."""


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (strings skipped)."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def loads_bounded(text: str | bytes, max_depth: int = MAX_JSON_DEPTH, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)`` refusing nesting deeper than ``max_depth``.

    Raises:
        JsonDepthError: too deep (also a ``ValueError``).
        ValueError: not JSON.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if text.count("[") + text.count("{") > max_depth and json_depth(text) > max_depth:
        raise JsonDepthError(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text, **kwargs)
    except RecursionError:
        raise JsonDepthError(f"JSON nested deeper than {max_depth} levels") from None

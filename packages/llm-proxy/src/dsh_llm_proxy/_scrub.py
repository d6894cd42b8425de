"""Scrubbing: run-specific text in requests becomes placeholders, on both sides of replay.

An agent puts its working directory, its home, today's date into its requests. Recorded as
they are, no later run could match them. A :class:`Scrub` turns them into placeholders:

- **literals** ``(placeholder, value)``: the value (a path of this run) becomes the
  placeholder in whatever is written or compared, and a replayed answer gets the *live* value
  back where the recording has the placeholder (a tool call's ``{{cwd}}/notes.txt`` reaches
  the agent as a real path of its run);
- **patterns** ``(regex, placeholder)``: user scrubbers (a date, a port); applied after the
  literals, in order. What a pattern matched has no single live value, so it is not put back.
  A pattern comes from a scenario or a test, which arrive in a pull request: it is compiled by
  RE2 (``google-re2``), so its run time is linear in the text whatever it says, and what only a
  backtracking engine does (back-references, look-arounds) is refused.

Record applies the scrub to every event before it is written; replay applies it to the
recorded and the live request alike before comparing them. Each event is scrubbed on its
own: a value a streaming upstream splits across two chunks stays split, and unscrubbed, in
those chunks (the complete block and the request side are whole).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any, cast

from dsh_core import Chunk, TextPattern

__all__ = ["Scrub", "parse_assignment"]

# Keys whose string values are JSON text: a value put back there is JSON-escaped.
_JSON_TEXT_KEYS = frozenset({"argumentsDelta", "arguments"})
_PLACEHOLDER = re.compile(r"^\{\{[A-Za-z][A-Za-z0-9_.:-]*\}\}$")


def parse_assignment(text: str, what: str) -> tuple[str, str]:
    """``PLACEHOLDER=VALUE`` (the first ``=`` splits), the placeholder ``{{name}}``.

    Raises:
        ValueError: no ``=``, a placeholder not of the form ``{{name}}``, or an empty value.
    """
    placeholder, sep, value = text.partition("=")
    if not sep or not _PLACEHOLDER.match(placeholder) or not value:
        raise ValueError(f"{what} {text!r}: expected {{{{name}}}}=VALUE")
    return placeholder, value


@dataclass(frozen=True, slots=True)
class Scrub:
    """What to replace in requests and logged events (see the module docstring).

    Attributes:
        literals: ``(placeholder, value)`` pairs; replaced longest value first.
        patterns: ``(regex, placeholder)`` pairs; applied in order after the literals.
    """

    literals: tuple[tuple[str, str], ...] = ()
    patterns: tuple[tuple[TextPattern, str], ...] = ()

    @classmethod
    def build(
        cls,
        literals: Sequence[tuple[str, str]] = (),
        patterns: Sequence[tuple[str, str]] = (),
    ) -> Scrub:
        """From ``(placeholder, value)`` literals and ``(placeholder, regex)`` patterns.

        Raises:
            ValueError: a pattern is not a regular expression, or matches the empty string.
        """
        compiled: list[tuple[TextPattern, str]] = []
        for placeholder, source in patterns:
            pattern = _linear_regex(source)
            if pattern.fullmatch("") is not None:
                raise ValueError(f"scrub {source!r}: matches the empty string")
            compiled.append((pattern, placeholder))
        ordered = sorted(((p, v) for p, v in literals if v), key=lambda pv: -len(pv[1]))
        return cls(tuple(ordered), tuple(compiled))

    def __bool__(self) -> bool:
        return bool(self.literals or self.patterns)

    def text(self, value: str, json_text: bool = False) -> str:
        """One string with every literal and pattern replaced by its placeholder; with
        ``json_text`` (tool-call arguments) a literal's JSON-escaped form too."""
        for placeholder, literal in self.literals:
            value = value.replace(literal, placeholder)
            if json_text:
                value = value.replace(json.dumps(literal)[1:-1], placeholder)
        for pattern, placeholder in self.patterns:
            value = pattern.sub(_literal(placeholder), value)
        return value

    def value(self, value: Any, json_text: bool = False) -> Any:
        """A JSON value scrubbed recursively (keys are kept)."""
        if isinstance(value, str):
            return self.text(value, json_text)
        if isinstance(value, list):
            return [self.value(v, json_text) for v in cast(list[Any], value)]
        if isinstance(value, dict):
            return {
                k: self.value(v, json_text or k in _JSON_TEXT_KEYS)
                for k, v in cast(dict[str, Any], value).items()
            }
        return value

    # --- putting the live values back into replayed answers ----------------------------------

    def _restore(self, value: Any, json_text: bool) -> Any:
        if isinstance(value, str):
            for placeholder, literal in self.literals:
                live = json.dumps(literal)[1:-1] if json_text else literal
                value = value.replace(placeholder, live)
            return value
        if isinstance(value, list):
            return [self._restore(v, json_text) for v in cast(list[Any], value)]
        if isinstance(value, dict):
            return {
                k: self._restore(v, json_text or k in _JSON_TEXT_KEYS)
                for k, v in cast(dict[str, Any], value).items()
            }
        return value

    def restore(self, chunk: Chunk) -> Chunk:
        """A recorded chunk with each literal's placeholder replaced by its live value
        (JSON-escaped inside tool-call arguments). The recording's placeholders come from
        the normaliser, which replaces whole values inside one chunk, so none is split
        across two chunks."""
        if not self.literals:
            return chunk
        return cast(Chunk, self._restore(chunk, False))

    async def restored(self, chunks: AsyncIterator[Chunk]) -> AsyncIterator[Chunk]:
        """``chunks`` through :meth:`restore`."""
        async for chunk in chunks:
            yield self.restore(chunk)


def _linear_regex(source: str) -> Any:
    """``source`` compiled by RE2; ValueError naming it when RE2 refuses it."""
    re2: Any = import_module("re2")  # google-re2 ships no type information
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(source, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(
            f"scrub {source!r}: not a regular expression the linear-time engine (RE2) "
            f"accepts ({reason}; no back-references or look-arounds)"
        ) from None


def _literal(placeholder: str) -> Callable[[Any], str]:
    """A replacement that inserts ``placeholder`` as it is (``re.sub`` would read its
    backslashes as escapes)."""
    return lambda _: placeholder

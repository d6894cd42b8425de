"""What the key scan does not call a secret, though a detector flagged it.

The keyword detectors flag any value assigned to something named like a key. Two kinds of
value are never a secret and were the scan's most common false positives:

- a **placeholder**: a word a person writes where a key would go (``placeholder``,
  ``dummy``, ``changeme``, ``your-api-key-here``, ``xxxxxxxx``, ``<your key>``) or a
  reference to one (``${OPENAI_API_KEY}``, ``{{key}}``, ``$KEY``, ``os.environ[...]``);
- a **variable name**: ``api_key_env: OPENAI_API_KEY`` names where the key is, not the key.

A value a scan was told to look for (the live key, a provider's key variable) is never
excused: only detector hits go through :func:`not_a_secret`.
"""

from __future__ import annotations

import re

__all__ = ["not_a_secret"]

_WORDS = frozenset(
    {
        "placeholder",
        "dummy",
        "fake",
        "changeme",
        "change-me",
        "example",
        "redacted",
        "scripted",
        "secret",
        "test",
        "none",
        "null",
        "empty",
        "unused",
        "sample",
        "todo",
    }
)
_REFERENCE = re.compile(
    r"^(?:\$\{[^{}]+\}|\{\{[^{}]+\}\}|\$[A-Za-z_][A-Za-z0-9_]*|<[^<>]+>|%\([^()]+\)s"
    r"|os\.environ.*|process\.env\..*)$"
)
_FILLER = re.compile(r"^(?:x+|X+|\*+|\.+|-+|_+|0+|(?:your|my)[-_ ].*(?:here|key|token))$", re.I)
_VARIABLE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_ASSIGNED = re.compile(r"""^.*?[:=]\s*["']?(?P<value>[^"'\s]*)["']?\s*$""")


def _value(flagged: str) -> str:
    """The assigned value of a keyword hit (``api_key = "x"`` → ``x``), else the hit."""
    match = _ASSIGNED.match(flagged)
    value = match.group("value") if match else flagged
    return value.strip().strip("\"'`")


def not_a_secret(flagged: str) -> bool:
    """Whether a detector's hit is a placeholder or a variable name (see module docstring)."""
    value = _value(flagged)
    if not value:
        return True
    lowered = value.lower()
    if lowered in _WORDS or lowered.strip("-_") in _WORDS:
        return True
    return bool(_REFERENCE.match(value) or _FILLER.match(value) or _VARIABLE.match(value))

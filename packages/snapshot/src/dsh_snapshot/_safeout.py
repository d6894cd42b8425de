"""What the tool prints is redacted and inert, whatever a scenario put in it.

Everything ``dsh-snapshot`` writes to its stdout and stderr passes, a line at a time, through
:func:`clean`: the key scan's :func:`~dsh_snapshot._keyscan.redact` (keys raw or encoded), then
every control character escaped (``\\x1b`` as text), so a foreign agent's stderr or a planted
review diff cannot retitle the terminal, move its cursor or type into the user's shell. Only
SGR colour sequences (``ESC [ … m``, what rich itself writes for colour) pass.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Generator, Iterable
from typing import TextIO

from dsh_snapshot._keyscan import redact

__all__ = ["SafeStream", "clean", "escape_controls", "safe_output"]

_CONTROL = re.compile(r"\x1b\[[0-9;]*m|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with every control character but newline and tab shown as ``\\xNN``
    (SGR colour sequences kept)."""

    def one(match: re.Match[str]) -> str:
        found = match.group(0)
        return found if len(found) > 1 else f"\\x{ord(found):02x}"

    return _CONTROL.sub(one, text)


def clean(text: str, literals: Iterable[str] = ()) -> str:
    """``text`` redacted (raw and encoded keys) and with its control characters escaped."""
    return escape_controls(redact(text, literals))


class SafeStream(io.TextIOBase):
    """A text stream that cleans each complete line before passing it on."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            done, self._pending = self._pending.rsplit("\n", 1)
            self.inner.write(clean(done + "\n"))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.inner.write(clean(self._pending))
            self._pending = ""
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # pyright: ignore[reportIncompatibleVariableOverride]
        return getattr(self.inner, "encoding", "utf-8")


@contextlib.contextmanager
def safe_output() -> Generator[None]:
    """Route ``sys.stdout`` and ``sys.stderr`` through :class:`SafeStream` while it lasts."""
    saved = sys.stdout, sys.stderr
    out, err = SafeStream(saved[0]), SafeStream(saved[1])
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    try:
        yield
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = saved

"""What the tool prints is redacted and inert, whatever a scenario put in it.

Everything ``dsh-snapshot`` writes to its stdout and stderr passes, a line at a time, through
:func:`clean`: the key scan's :func:`~dsh_snapshot._keyscan.redact` (keys raw or encoded), then
every character a terminal or a log viewer would act on instead of show is escaped as text
(``\\x1b``, ``\\u202e``): C0 and C1 controls (so every escape sequence, SGR colour included: a
foreign agent's stderr or a planted review diff can neither retitle the terminal, move its
cursor, type into the user's shell, nor hide or recolour a line), and Unicode format,
separator, surrogate and private-use characters (bidi overrides and isolates reorder a line,
Trojan-Source style). The CLI's own colours survive: its consoles (:func:`safe_console`)
escape the text of every segment they render, then mark each escape sequence they write
themselves with a random tag of this process, which only :func:`clean` turns back into
``ESC``. Scenario data cannot carry the tag, so no sequence of it is ever written raw.
"""

from __future__ import annotations

import contextlib
import io
import re
import secrets
import sys
import unicodedata
from collections.abc import Generator, Iterable
from typing import Any, TextIO

from rich.console import Console
from rich.segment import Segment

from dsh_snapshot._keyscan import redact

__all__ = ["SafeStream", "clean", "code_point_is_plain", "escape_controls", "safe_console",
           "safe_output"]  # fmt: skip

# C0 (but tab and newline), DEL and C1; Unicode format (Cf: bidi controls, zero-width and
# invisible characters), line/paragraph separators (Zl, Zp), surrogates (Cs), private use
# (Co) and the interlinear annotation controls.
_INERT_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
_ACTIVE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f"
                     r"\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
                     r"\ue000-\uf8ff\ud800-\udfff]|[^\x00-\u00ff]")  # fmt: skip


def _shown(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character but newline and tab, and every Unicode format,
    separator, surrogate or private-use character, shown as ``\\xNN`` / ``\\uNNNN`` (escape
    sequences included: nothing of ``text`` is acted on by a terminal)."""

    def one(match: re.Match[str]) -> str:
        char = match.group(0)
        if code_point_is_plain(char):
            return char
        return _shown(char)

    return _ACTIVE.sub(one, text)


def code_point_is_plain(char: str) -> bool:
    """Whether ``char`` is shown as itself (a letter, a digit, a symbol, a space)."""
    if char in "\t\n":
        return True
    return unicodedata.category(char) not in _INERT_CATEGORIES and not (
        0xFFF9 <= ord(char) <= 0xFFFB or 0x0080 <= ord(char) <= 0x009F
    )


# Stands for ESC in what our own consoles render; random per process, so unforgeable.
_OURS = f"[dsh-esc-{secrets.token_hex(16)}]"


class _SafeConsole(Console):
    """A console whose rendered text is inert and whose own sequences are tagged."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        inert = (
            segment if segment.control else Segment(escape_controls(segment.text), segment.style)
            for segment in buffer
        )
        rendered = super()._render_buffer(inert)
        # Tagged only for a SafeStream, which untags after cleaning; written elsewhere the
        # sequences are ours already (the texts were escaped above).
        return rendered.replace("\x1b", _OURS) if isinstance(self.file, SafeStream) else rendered


def safe_console(**options: Any) -> Console:
    """A rich console for everything the CLI prints (see the module docstring)."""
    return _SafeConsole(**options)


def clean(text: str, literals: Iterable[str] = ()) -> str:
    """``text`` redacted (raw and encoded keys) and with its control characters escaped;
    the sequences our own consoles wrote (tagged) are put back."""
    return escape_controls(redact(text, literals)).replace(_OURS, "\x1b")


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

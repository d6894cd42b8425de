"""Everything the CLI prints is inert: no escape sequence and no bidi or format character of
scenario data reaches a terminal or a CI log raw, while the CLI's own colours survive."""

from __future__ import annotations

import io

import pytest
from rich.text import Text

from dsh_snapshot._safeout import SafeStream, clean, escape_controls, safe_console

_DATA = " ".join(
    (
        "a\x1b[8mhidden\x1b[0m",
        "\x1b]0;title\x07",
        "\u202eevil\u202c",
        "\u2066iso\u2069",
        "z\u200bw",
        "\ue000",
        "\x9b2J",
    )
)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # SGR too: it can hide or recolour
        ("\x1b]52;c;eA==\x07", "\\x1b]52;c;eA==\\x07"),  # OSC 52 would write the clipboard
        ("\x9b2J", "\\x9b2J"),  # a C1 CSI
        ("\u202eabc\u202c", "\\u202eabc\\u202c"),  # right-to-left override (Trojan Source)
        ("\u2066x\u2069", "\\u2066x\\u2069"),  # isolates
        ("a\u200bb\u00adc", "a\\u200bb\\xadc"),  # zero-width space, soft hyphen
        ("\u2028", "\\u2028"),  # line separator
        ("\ue000", "\\ue000"),  # private use
        ("tab\tnew\nline é ü ✓ 中文 😀", "tab\tnew\nline é ü ✓ 中文 😀"),  # shown as they are
    ],
    ids=["sgr", "osc52", "c1-csi", "rlo", "isolates", "zero-width", "separator", "private",
         "plain"],
)  # fmt: skip
def test_every_active_character_is_escaped(text: str, shown: str) -> None:
    assert escape_controls(text) == shown


def test_data_in_a_console_is_escaped_and_the_console_s_own_colour_kept() -> None:
    inner = io.StringIO()
    stream = SafeStream(inner)
    console = safe_console(file=stream, force_terminal=True, color_system="standard", width=200)
    console.print(Text(_DATA, style="bold"))
    console.print("[red]FAIL[/red] " + _DATA.replace("[", "\\["))
    stream.flush()
    out = inner.getvalue()
    assert "\x1b[1m" in out  # the console's bold...
    assert "\x1b[31mFAIL" in out  # ...and red, as written by rich
    for active in ("\x1b[8m", "\x1b]", "\x07", "\u202e", "\u2066", "\u200b", "\ue000", "\x9b"):
        assert active not in out, repr(active)
    assert out.count("hidden") == 2  # shown, with its sequence as text before it
    assert out.startswith("\x1b[1ma\\x1b[8mhidden")
    assert "[dsh-esc-" not in out


def test_data_cannot_forge_the_console_s_tag() -> None:
    forged = "[dsh-esc-00000000000000000000000000000000][31mred"
    assert clean(forged) == forged  # another process's (or a guessed) tag is just text

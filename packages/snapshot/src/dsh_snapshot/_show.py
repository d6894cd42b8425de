"""``dsh-snapshot show PATH…``: a recording's session tree as text (rich on a terminal, plain when
piped) or, with ``--html FILE``, as one self-contained HTML page.

The text form is a list of lines, each with its tree guides, its text and a style name; the
terminal and the plain form print the same lines, so the snapshot tests of the plain form cover
what a terminal shows. Text from the logs is untrusted: control and formatting characters are
escaped before it reaches a terminal, and it is never read as rich markup.
"""

from __future__ import annotations

import argparse
import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, cast

from rich.console import Console
from rich.text import Text

from dsh_core import DshError
from dsh_snapshot._safeout import safe_console
from dsh_snapshot._tree import (
    ModelCall,
    SessionNode,
    SessionTree,
    ToolCallView,
    TurnView,
    sum_usage,
)
from dsh_snapshot._treeload import find_recordings, load_tree

__all__ = [
    "Line",
    "add_show_parser",
    "calls_detail",
    "render_lines",
    "run_show",
    "safe_text",
    "tool_call_text",
    "tree_lines",
]

_CLIP = 160
_STYLES = {
    "title": "bold",
    "session": "bold cyan",
    "inherited": "dim",
    "boundary": "yellow",
    "note": "italic yellow",
    "tool": "magenta",
    "error": "red",
}
_TOKEN_NAMES = (
    ("inputTokens", "in"),
    ("outputTokens", "out"),
    ("cacheReadTokens", "cache"),
    ("reasoningTokens", "reasoning"),
)


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the text tree: guides (``│  ├─``), text, and a style name (``""`` plain)."""

    guides: str
    text: str
    style: str = ""


def safe_text(text: str, limit: int | None = _CLIP) -> str:
    """``text`` on one line with control and formatting characters escaped, clipped to ``limit``.

    Log text may hold terminal escapes or bidi overrides written to mislead a reader; escaped,
    they show as what they are.
    """
    out: list[str] = []
    for char in text:
        if char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co"):
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    joined = "".join(out)
    if limit is not None and len(joined) > limit:
        return joined[: limit - 1] + "…"
    return joined


def tokens(usage: dict[str, int]) -> str:
    """``tokens in 880, out 10, cache 0, reasoning 12``; ``""`` when nothing was reported."""
    parts = [f"{short} {usage[key]}" for key, short in _TOKEN_NAMES if key in usage]
    return f"tokens {', '.join(parts)}" if parts else ""


def calls_summary(calls: Sequence[ModelCall]) -> str:
    """``2 model calls (31 chunks)``."""
    chunks = sum(c.chunks for c in calls)
    plural = "" if len(calls) == 1 else "s"
    return f"{len(calls)} model call{plural} ({chunks} chunks)"


def session_summary(node: SessionNode) -> str:
    """The facts of a session's own line, after its label."""
    parts = [node.kind]
    origin = node.origin
    if origin is not None and origin.call_id:
        verb = "forked" if node.kind == "fork" else "spawned"
        where = f"{verb} in turn {origin.turn} by {safe_text(origin.tool, 40)} "
        where += safe_text(origin.call_id, 60)
        if origin.description:
            where += f' "{safe_text(origin.description, 60)}"'
        parts = [where]
    elif origin is not None:  # a fork the proxy inferred: it diverged after that turn
        parts = [f"forked after turn {origin.turn}"]
    elif node.kind != "primary":
        parts.append("(no tool call found in the parent)")
    if node.kind == "fork" or node.seed_length:
        parts.append(f"seedLength {node.seed_length}")
    parts.append(f"{node.events} events")
    if node.model:
        parts.append(f"model {safe_text(node.model, 60)}")
    own = node.own_calls
    parts.append(calls_summary(own))
    usage = tokens(node.own_usage())
    if usage:
        parts.append(usage)
    return " · ".join(parts)


def calls_detail(turn: TurnView) -> str:
    """``model calls: step 1 (23 chunks, tool-calls) · step 2 (43 chunks, stop)``."""
    calls = [f"step {c.step} ({c.chunks} chunks, {safe_text(c.finish, 40)})" for c in turn.calls]
    return "model calls: " + " · ".join(calls) if calls else ""


def _as_is(text: str, limit: int | None = None) -> str:
    return text


def tool_call_text(call: ToolCallView, clip: Callable[[str, int | None], str] = _as_is) -> str:
    """``tool bash call_1 "List files" → error result → session.1.jsonl``, each value passed
    through ``clip`` (the terminal's :func:`safe_text`; the page escapes the whole line)."""
    text = f"tool {clip(call.name, 40)} {clip(call.call_id, 60)}"
    if call.description:
        text += f' "{clip(call.description, 60)}"'
    if call.is_error:
        text += " → error result"
    if call.child:
        text += f" → {clip(call.child, None)}"
    return text


def turn_summary(turn: TurnView) -> str:
    """``turn 2 completed · 1 model call (17 chunks) · tokens in 880, out 10``."""
    parts = [f"turn {turn.number} {safe_text(turn.end, 40)}", calls_summary(turn.calls)]
    usage = tokens(sum_usage(turn.calls))
    if usage:
        parts.append(usage)
    if turn.inherited:
        parts.append("inherited")
    return " · ".join(parts)


def _turn_details(turn: TurnView) -> list[Line]:
    style = "inherited" if turn.inherited else ""
    lines: list[Line] = []
    if turn.prompt:
        lines.append(Line("", f'prompt: "{safe_text(turn.prompt)}"', style))
    if turn.calls:
        lines.append(Line("", calls_detail(turn), style))
    for call in turn.tool_calls:
        text = tool_call_text(call, safe_text)
        lines.append(Line("", text, style or ("error" if call.is_error else "tool")))
    if turn.final_message:
        lines.append(Line("", f'final: "{safe_text(turn.final_message)}"', style))
    return lines


def _boundary(node: SessionNode) -> Line:
    return Line(
        "",
        f"╌╌ seed boundary: the {node.seed_length} events above were inherited from the parent; "
        "this session's own events start here ╌╌",
        "boundary",
    )


def _session_lines(node: SessionNode, lead: str, last: bool, top: bool) -> list[Line]:
    branch = "" if top else ("└─ " if last else "├─ ")
    inner = lead + ("" if top else ("   " if last else "│  "))
    label = safe_text(node.label, None)
    lines = [Line(lead + branch, f"{label}  {session_summary(node)}", "session")]
    items = node.items()
    for index, item in enumerate(items):
        final = index == len(items) - 1
        if isinstance(item, SessionNode):
            lines.extend(_session_lines(item, inner, final, top=False))
            continue
        if item is None:
            head, details = _boundary(node), []
        else:
            style = "inherited" if item.inherited else ""
            prefix = "┆ " if item.inherited else ""
            head, details = Line("", prefix + turn_summary(item), style), _turn_details(item)
        lines.append(Line(inner + ("└─ " if final else "├─ "), head.text, head.style))
        pad = inner + ("   " if final else "│  ")
        lines.extend(Line(pad + "   ", d.text, d.style) for d in details)
    return lines


def tree_lines(tree: SessionTree) -> list[Line]:
    """The whole tree as lines: the title, notes, then each root session and its descendants."""
    sessions = sum(1 for _ in tree.walk())
    count = f"{sessions} session{'' if sessions == 1 else 's'}"
    title = f"{safe_text(tree.name, None)}  ({tree.kind}, {count})"
    lines = [Line("", title, "title")]
    lines.extend(Line("", f"note: {safe_text(n, None)}", "note") for n in tree.notes)
    for root in tree.roots:
        lines.extend(_session_lines(root, "", last=True, top=True))
    return lines


def render_lines(lines: Sequence[Line]) -> str:
    """The plain text form (what a pipe gets), newline-terminated."""
    return "".join(f"{line.guides}{line.text}".rstrip() + "\n" for line in lines)


def _print_rich(console: Console, lines: Sequence[Line]) -> None:
    for line in lines:
        text = Text(line.guides, style="dim")
        text.append(line.text, style=_STYLES.get(line.style, ""))
        console.print(text, soft_wrap=True, highlight=False)


# --- the subcommand -------------------------------------------------------------------------


def add_show_parser(sub: Any) -> None:
    """Register ``show`` on the CLI's subparsers."""
    subparsers = cast("argparse._SubParsersAction[argparse.ArgumentParser]", sub)
    help_text = (
        "print the session tree of each recording (scenario folder, upstream folder or "
        "dsh-llm-proxy root) under the paths"
    )
    cmd = subparsers.add_parser("show", help=help_text, description=help_text)
    cmd.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    cmd.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the trees as one self-contained HTML page",
    )


def run_show(paths: Sequence[Path], html: Path | None, out: TextIO | None = None) -> int:
    """Print the trees of every recording under ``paths``; 0, or 2 when one cannot be read
    (the message names the file and line)."""
    stream = out or sys.stdout
    trees: list[SessionTree] = []
    status = 0
    for path in paths:
        try:
            found = find_recordings(path)
        except DshError as exc:
            print(f"dsh-snapshot show: {exc}", file=sys.stderr)
            status = 2
            continue
        for folder, kind in found:
            try:
                trees.append(load_tree(folder, kind))
            except DshError as exc:
                print(f"dsh-snapshot show: {exc}", file=sys.stderr)
                status = 2
    terminal = stream.isatty()
    console = safe_console(file=stream, highlight=False) if terminal else None
    for index, tree in enumerate(trees):
        lines = tree_lines(tree)
        if index:
            stream.write("\n")
        if console is not None:
            _print_rich(console, lines)
        else:
            stream.write(render_lines(lines))
    if html is not None:
        from dsh_snapshot._fsafe import write_user_file  # noqa: PLC0415 - only with --html
        from dsh_snapshot._html import trees_page  # noqa: PLC0415 - only with --html
        from dsh_snapshot._keyscan import redact_html  # noqa: PLC0415 - only with --html

        write_user_file(html, redact_html(trees_page(trees)).encode("utf-8"))
        print(f"dsh-snapshot show: wrote {html}", file=sys.stderr)
    return status

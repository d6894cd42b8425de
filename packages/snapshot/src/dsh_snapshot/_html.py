"""Session trees as one self-contained HTML page: inline CSS, no script, no external asset.

Everything taken from a log or a scenario (messages, tool names, ids, file names, diffs) passes
through :func:`html.escape`; the page also carries a Content-Security-Policy that allows no
script and no network fetch at all, so a hostile message in a recording stays text.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from dsh_snapshot._show import (
    calls_detail,
    calls_summary,
    session_summary,
    tokens,
    tool_call_text,
    turn_summary,
)
from dsh_snapshot._tree import SessionNode, SessionTree, TurnView, sum_usage

__all__ = ["page", "tree_html", "trees_page"]

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_CSS = """
:root { --fg:#1f2328; --muted:#656d76; --line:#d0d7de; --pass:#1a7f37; --fail:#cf222e;
        --seed:#9a6700; --bg-soft:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       margin: 24px auto; max-width: 1200px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 0; }
.summary { color: var(--muted); margin: 0 0 16px; }
table.results { border-collapse: collapse; margin: 8px 0 24px; }
table.results th, table.results td { border: 1px solid var(--line); padding: 4px 10px;
  text-align: left; }
.badge { display: inline-block; border-radius: 10px; padding: 0 9px; font-size: 12px;
         font-weight: 600; color: #fff; vertical-align: middle; }
.badge.pass { background: var(--pass); } .badge.fail { background: var(--fail); }
.badge.kind { background: var(--muted); }
section.recording { border: 1px solid var(--line); border-radius: 6px; margin: 0 0 20px;
                    padding: 12px 16px; }
section.recording.failed { border-color: var(--fail); }
.path { color: var(--muted); font-size: 12px; }
.note { color: var(--seed); font-style: italic; margin: 4px 0; }
ul.failures { color: var(--fail); margin: 8px 0; padding-left: 20px; }
pre, code { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre.diff { background: var(--bg-soft); border: 1px solid var(--line); border-radius: 6px;
           padding: 8px; white-space: pre-wrap; word-break: break-all; }
.diff .line { display: block; min-height: 1.4em; }
.diff .add { color: var(--pass); background: #dafbe1; }
.diff .del { color: var(--fail); background: #ffebe9; }
.diff .hunk { color: #8250df; }
h3 { font-size: 14px; margin: 10px 0 4px; }
ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 18px;
                      border-left: 1px dashed var(--line); }
ul.tree { border-left: none; padding-left: 0; margin-top: 8px; }
li.session > .session-head { font-weight: 600; margin: 6px 0 2px; }
li.session > .session-head .label { color: #0969da; font-family: ui-monospace, monospace; }
.facts { font-weight: 400; color: var(--muted); }
li.turn { margin: 2px 0 4px; }
li.turn.inherited { opacity: .5; }
li.turn .turn-head { font-weight: 500; }
li.seed-boundary { color: var(--seed); border-top: 2px dashed var(--seed); margin: 6px 0;
                   padding-top: 2px; font-size: 12px; }
.msg { color: var(--fg); white-space: pre-wrap; word-break: break-word; margin: 0 0 0 12px; }
.msg b { color: var(--muted); font-weight: 500; }
.tool { color: #8250df; margin-left: 12px; } .tool.error { color: var(--fail); }
details > summary { cursor: pointer; }
.msg.folded .more { color: var(--muted); display: block; }
.hint { color: var(--muted); }
.calls { color: var(--muted); font-size: 12px; margin-left: 12px; }
"""


def page(title: str, body: str) -> str:
    """A complete HTML document around ``body`` (already escaped HTML)."""
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"{body}\n</body>\n</html>\n"
    )


# A text longer than this many lines or characters is folded to its first lines (a foreign
# agent's 20 KB context message would bury the tree); the rest opens on a click.
FOLD_LINES = 3
FOLD_CHARS = 400


def _message(kind: str, text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= FOLD_LINES and len(text) <= FOLD_CHARS:
        return f'<div class="msg {kind}"><b>{kind}:</b> {escape(text)}</div>'
    head = "\n".join(lines[:FOLD_LINES])[:FOLD_CHARS]
    more = f"… ({len(lines)} lines, {len(text):,} characters: click to show all)"
    return (
        f'<details class="msg {kind} folded"><summary><b>{kind}:</b> {escape(head)}'
        f'<span class="more">{escape(more)}</span></summary>{escape(text)}</details>'
    )


def _turn_html(turn: TurnView) -> str:
    classes = "turn inherited" if turn.inherited else "turn"
    parts = [
        f'<li class="{classes}" data-turn="{turn.number}">',
        f'<div class="turn-head">{escape(turn_summary(turn))}</div>',
    ]
    if turn.prompt:
        parts.append(_message("prompt", turn.prompt))
    if turn.calls:
        parts.append(f'<div class="calls">{escape(calls_detail(turn))}</div>')
    for call in turn.tool_calls:
        text = tool_call_text(call)
        css = "tool error" if call.is_error else "tool"
        parts.append(f'<div class="{css}">{escape(text)}</div>')
    if turn.final_message:
        parts.append(_message("final", turn.final_message))
    parts.append("</li>")
    return "".join(parts)


def _session_html(node: SessionNode) -> str:
    parts = [
        f'<li class="session" data-session="{escape(node.label)}" data-kind="{node.kind}"'
        f' data-seed-length="{node.seed_length}">',
        f'<div class="session-head"><span class="label">{escape(node.label)}</span> '
        f'<span class="facts">{escape(session_summary(node))}</span></div><ul>',
    ]
    for item in node.items():
        if isinstance(item, SessionNode):
            parts.append(_session_html(item))
        elif item is None:
            parts.append(_boundary(node))
        else:
            parts.append(_turn_html(item))
    parts.append("</ul></li>")
    return "".join(parts)


def _boundary(node: SessionNode) -> str:
    return (
        f'<li class="seed-boundary">seed boundary: the {node.seed_length} events above were '
        "inherited from the parent; this session's own events start here</li>"
    )


def tree_html(tree: SessionTree) -> str:
    """One recording's tree as an HTML fragment (a ``<ul class="tree">``, notes before it)."""
    notes = "".join(f'<p class="note">note: {escape(n)}</p>' for n in tree.notes)
    roots = "".join(_session_html(r) for r in tree.roots)
    calls = [c for node in tree.walk() for c in node.own_calls]
    facts = f"{calls_summary(calls)} {tokens(sum_usage(calls))}".strip()
    return f'{notes}<p class="facts">{escape(facts)}</p><ul class="tree">{roots}</ul>'


def trees_page(trees: Sequence[SessionTree], title: str = "dsh-snapshot show") -> str:
    """The page ``dsh-snapshot show --html`` writes: one section per recording."""
    sections = [
        f'<section class="recording" data-recording="{escape(t.name)}">'
        f'<h2>{escape(t.name)} <span class="badge kind">{escape(t.kind)}</span></h2>'
        f'<div class="path">{escape(str(t.path))}</div>{tree_html(t)}</section>'
        for t in trees
    ]
    return page(title, f"<h1>{escape(title)}</h1>\n" + "\n".join(sections))

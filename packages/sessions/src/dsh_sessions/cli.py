"""dsh-sessions: list, show, check and convert any session store, read-only on the source.

    dsh-sessions ls PATH
    dsh-sessions show PATH ID [--expand-packed]
    dsh-sessions check PATH
    dsh-sessions convert SRC DST [--to jsonl|sqlite|sqlite-v4|sqlite-1004] [--expand-packed]

PATH, SRC and DST may also name a sessions root in a server store: postgres:ROOT (the server
from DSH_POSTGRES_DSN or the PG* variables; ROOT is the agent's sessions root).

Exit status: 0 done, 1 check found a damaged log, 2 the store or the arguments were
refused (one line on stderr naming the file and the reason; the file unchanged).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import NoReturn

from dsh_core import DshError
from dsh_sessions._convert import Target, convert, target_for
from dsh_sessions._sources import Source
from dsh_sessions._stores import convert_to_store, open_any, parse_store_root

__all__ = ["main"]

_PROG = "dsh-sessions"


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


def _version() -> str:
    try:
        return version("dsh-sessions")
    except PackageNotFoundError:  # a source tree that is not installed
        return "0+unknown"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=_PROG, description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    ls = commands.add_parser("ls", help="one line per session: id, createdAt, parent, events")
    ls.add_argument("path", type=Path)
    show = commands.add_parser("show", help="print one session's log as JSONL")
    show.add_argument("path", type=Path)
    show.add_argument("session_id", metavar="ID")
    show.add_argument("--expand-packed", action="store_true", help="expand packed chunk rows")
    check = commands.add_parser("check", help="read every session; report each damaged one")
    check.add_argument("path", type=Path)
    conv = commands.add_parser("convert", help="write every session of SRC to the new store DST")
    conv.add_argument("src", metavar="SRC", type=Path)
    conv.add_argument("dst", metavar="DST", type=Path)
    conv.add_argument(
        "--to",
        choices=[target.value for target in Target],
        help="the store to write (default: sqlite for a .sqlite3/.sqlite/.db DST, else jsonl)",
    )
    conv.add_argument(
        "--expand-packed",
        action="store_true",
        help="write packed chunk rows as their assistant/chunk events (JSONL)",
    )
    return parser


def _ls(source: Source) -> int:
    print(f"# {source.path}: {source.kind}, {len(source.entries)} sessions")
    for entry in source.entries:
        stored = entry.load()
        header = stored.log.header
        parent = header.parent_session or "-"
        print(
            f"{header.id}\t{header.created_at}\t{parent}\t{len(stored.log.events)} events"
            f"\t{stored.where}"
        )
    return 0


def _show(source: Source, session_id: str, expand_packed: bool) -> int:
    for entry in source.entries:
        stored = entry.load()
        if stored.log.header.id == session_id:
            sys.stdout.write(stored.text(expand_packed=expand_packed))
            return 0
    print(f"{_PROG}: no session {session_id} in {source.path}", file=sys.stderr)
    return 2


def _check(source: Source) -> int:
    problems = 0
    for entry in source.entries:
        try:
            stored = entry.load()
        except DshError as exc:
            problems += 1
            print(f"damaged\t{entry.where}\t{exc}")
            continue
        print(f"ok\t{stored.where}\t{len(stored.log.events)} events")
    print(f"{len(source.entries)} sessions, {problems} damaged ({source.path}: {source.kind})")
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dsh-sessions``; return the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "convert":
            source = open_any(args.src)
            store = parse_store_root(str(args.dst))
            if store is not None:
                if args.to or args.expand_packed:
                    raise ValueError(f"{store}: --to and --expand-packed are for file stores")
                count = convert_to_store(source, store)
                print(f"{count} sessions: {source.path} ({source.kind}) -> {store}")
                return 0
            target = Target(args.to) if args.to else target_for(args.dst)
            count = convert(source, args.dst, target, expand_packed=args.expand_packed)
            print(f"{count} sessions: {source.path} ({source.kind}) -> {args.dst} ({target.value})")
            return 0
        source = open_any(args.path)
        if args.command == "ls":
            return _ls(source)
        if args.command == "show":
            return _show(source, args.session_id, args.expand_packed)
        return _check(source)
    except (DshError, OSError, ValueError) as exc:
        message = " ".join(str(exc).split("\n"))
        print(f"{_PROG}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover - the console script calls main()
    sys.exit(main())

"""``python -m dsh_snapshot.schemas [--check]``: regenerate (or check) the shipped schemas."""

from __future__ import annotations

import sys

from dsh_snapshot.schemas import schema_problems, write_schemas


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        problems = schema_problems()
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    if argv:
        print("usage: python -m dsh_snapshot.schemas [--check]", file=sys.stderr)
        return 2
    for name in write_schemas():
        print(f"wrote {name}")
    return 0


sys.exit(main(sys.argv[1:]))

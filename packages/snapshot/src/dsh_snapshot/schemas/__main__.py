"""``python -m dsh_snapshot.schemas [--check]``: regenerate (or check) the shipped schemas."""

from __future__ import annotations

import sys

from dsh_snapshot.schemas import schema_problems, write_schemas


def main(argv: list[str]) -> int:
    """Regenerate the schema files, or with ``--check`` name each stale one (exit 1)."""
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


# Guarded so that importing every module of the package (nox -s build) runs nothing.
if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

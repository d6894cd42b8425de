"""Finding a sandboxed test's processes from the host."""

from __future__ import annotations

import contextlib
from pathlib import Path

__all__ = ["processes_named"]


def _alive(stat: str) -> bool:
    # The state letter follows the command name in parentheses; a zombie has ended.
    return stat.rsplit(")", 1)[1].split(maxsplit=1)[0] != "Z"


def processes_named(token: str) -> list[int]:
    """Live (not zombie) host pids whose command line holds ``token``.

    A sandboxed ``$$`` or ``$!`` is a pid of the sandbox's own PID namespace, meaningless on
    the host: a test names its processes (``exec -a TOKEN sleep 60``, or the token in a
    ``bash -c`` command line) and looks them up here.
    """
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                cmdline = (entry / "cmdline").read_bytes()
                if token.encode() in cmdline and _alive((entry / "stat").read_text()):
                    found.append(int(entry.name))
    return found

"""A hostile stand-in for the agent process: it tries to change and read what lies outside its run.

Run three ways by ``test_snapshot_agent_confine.py``: as a fork server's entry
(``escape_probe:main``, the warm agent's forked child), as a script through the cold launcher,
and as a recorded ``bash`` command of the real agent run without bubblewrap (so the agent's
own confinement is all that stands in its way). Standard library only.

Its plan is the JSON object in ``argv[1]`` or ``PROBE_PLAN``:

- ``change``: ``{label: path}`` — files it tries to change every way a file changes: content
  (append, truncate), mode, owner, times, xattrs, links and names beside it, rename, unlink;
  each also through ``/proc/<outside_pid>/root`` (an unconfined process's view);
- ``read``: ``{label: path}`` — files it tries to read (directly and through ``/proc``);
- ``write``: ``{label: folder}`` — where writing (and chmod, utime) must work;
- ``outside_pid``: an unconfined process (the test's), also sent signal 0.

It prints one JSON object ``{"change": {label: {op: result}}, "read": …, "write": …,
"signal": result}`` (each result ``ok`` or the error's text) on one line, and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import cast


def _try(action: Callable[[], object]) -> str:
    try:
        action()
    except OSError as exc:
        return os.strerror(exc.errno) if exc.errno else str(exc)
    return "ok"


def _append(path: str) -> None:
    with open(path, "ab") as sink:
        sink.write(b"pwned\n")


def _create(path: str) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))


def _changes(path: str) -> dict[str, Callable[[], object]]:
    """Every way to change ``path`` (or its folder), in an order that leaves the path there
    for as long as possible (rename and unlink come last)."""
    return {
        "append": lambda: _append(path),
        "truncate": lambda: os.truncate(path, 0),
        "chmod": lambda: os.chmod(path, 0o777),
        "chown": lambda: os.chown(path, os.getuid(), os.getgid()),
        "utime": lambda: os.utime(path, (0, 0)),
        "setxattr": lambda: os.setxattr(path, "user.dsh.probe", b"pwned"),
        "create_beside": lambda: _create(path + ".new"),
        "mkdir_beside": lambda: os.mkdir(path + ".dir"),
        "symlink_beside": lambda: os.symlink("/", path + ".link"),
        "hardlink_beside": lambda: os.link(path, path + ".hard"),
        "rename": lambda: os.rename(path, path + ".moved"),
        "unlink": lambda: os.unlink(path if os.path.lexists(path) else path + ".moved"),
    }


def _read(path: str) -> None:
    with open(path, "rb") as source:
        source.read()


def _paths(plan: dict[str, object], key: str) -> dict[str, str]:
    value = plan.get(key, {})
    assert isinstance(value, dict), f"{key} must be an object"
    items = cast(dict[object, object], value).items()
    return {str(k): str(v) for k, v in items}


def run(plan: dict[str, object]) -> dict[str, object]:
    """Carry out ``plan`` (module docstring); what happened."""
    outside = int(str(plan.get("outside_pid", 1)))
    via_proc = f"/proc/{outside}/root"
    change: dict[str, dict[str, str]] = {}
    for label, path in _paths(plan, "change").items():
        results = {
            "proc_root_append": _try(lambda p=path: _append(via_proc + p)),
            "proc_root_chmod": _try(lambda p=path: os.chmod(via_proc + p, 0o777)),
        }
        results |= {op: _try(action) for op, action in _changes(path).items()}
        change[label] = results
    read = {
        label: {
            "read": _try(lambda p=path: _read(p)),
            "proc_root_read": _try(lambda p=path: _read(via_proc + p)),
        }
        for label, path in _paths(plan, "read").items()
    }
    write: dict[str, dict[str, str]] = {}
    for label, folder in _paths(plan, "write").items():
        target = os.path.join(folder, f"probe-wrote-this-{os.getpid()}")
        write[label] = {
            "create": _try(lambda t=target: _append(t)),
            "chmod": _try(lambda t=target: os.chmod(t, 0o600)),
            "utime": _try(lambda t=target: os.utime(t, (0, 0))),
        }
    signal = _try(lambda: os.kill(outside, 0))
    return {"change": change, "read": read, "write": write, "signal": signal}


def main() -> None:
    """The fork server's entry and the script's: the plan from ``argv[1]`` or ``PROBE_PLAN``."""
    text = sys.argv[1] if len(sys.argv) > 1 else os.environ["PROBE_PLAN"]
    print(json.dumps(run(json.loads(text)), sort_keys=True), flush=True)


if __name__ == "__main__":
    main()

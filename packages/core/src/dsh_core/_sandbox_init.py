"""The supervisor a sandboxed ``bash`` command runs under, inside bubblewrap.

Run as ``python -I -S _sandbox_init.py STATUS_FD CONTROL_FD LIMITS -- argv...``. It first sets
``LIMITS`` (``RESOURCE=VALUE,…:CAP``, soft and hard alike: :mod:`dsh_core._sandbox_limits`) on
itself, which the command inherits. A ``CAP`` other than 0 is a number of processes it watches
for (the host's root is exempt from ``RLIMIT_NPROC``): past it, every process of the sandbox
is killed. With ``STATUS_FD`` ``-`` (no supervision) it then execs the command, or, watching,
waits for it and exits as it did (128+N for signal N).

Bubblewrap reports a command killed by signal N as exit code 128+N and forwards no signal,
while the ``bash`` tool must tell ``kill -TERM $$`` from ``exit 143`` and give a timed-out
command SIGTERM and a grace period before SIGKILL (upstream's behaviour). This process,
inside the sandbox, starts the command as the leader of its own process group and:

- for each byte read from ``CONTROL_FD`` (a signal number the host sends), signals that group;
  end of file there (the host went away) kills the group;
- when the command ends, writes its raw wait status (decimal, one line) to ``STATUS_FD``.

When it exits, bubblewrap's PID 1 exits, and the kernel kills whatever the command left behind
in the sandbox's PID namespace. Standard library only, nothing imported from the package: the
interpreter starts with ``-I -S``.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import sys
from typing import NoReturn

__all__ = ["main"]

_POLL = 0.02  # seconds between two counts of the processes, when a cap is watched


def main(argv: list[str]) -> int:
    """Supervise ``argv[4:]``; the exit code (127 when the command cannot start)."""
    listed, _, cap_text = argv[2].partition(":")
    for item in filter(None, listed.split(",")):
        kind, value = (int(part) for part in item.split("="))
        resource.setrlimit(kind, (value, value))
    cap, command, plain = int(cap_text or 0), argv[4:], argv[0] == "-"
    if plain and not cap:
        _exec(command)
    status_fd, control_fd = (-1, -1) if plain else (int(argv[0]), int(argv[1]))
    pid = os.fork()
    if pid == 0:
        try:
            if not plain:
                os.close(status_fd)
                os.close(control_fd)
                os.setpgid(0, 0)
        except OSError as exc:
            os.write(2, f"dsh sandbox: {exc.strerror}\n".encode())
            os._exit(127)
        _exec(command)
    pidfd = os.pidfd_open(pid)
    watching = [pidfd] if plain else [pidfd, control_fd]
    stopped = False
    while True:
        ready, _, _ = select.select(watching, [], [], _POLL if cap else None)
        if cap and not stopped and _processes() > cap:
            stopped = True
            os.write(2, f"dsh sandbox: more than {cap} processes: the command is killed\n".encode())
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)  # every process of the namespace but init and us
        if pidfd in ready:
            break
        if control_fd not in ready:
            continue
        data = os.read(control_fd, 64)
        if not data:
            watching.remove(control_fd)
            data = bytes([signal.SIGKILL])
        for number in data:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, number)
    _, status = os.waitpid(pid, 0)
    if plain:
        return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    os.write(status_fd, f"{status}\n".encode())
    return 0


def _processes() -> int:
    """The processes of this PID namespace (the sandbox's own ``/proc``)."""
    return sum(name.isdigit() for name in os.listdir("/proc"))


def _exec(command: list[str]) -> NoReturn:
    """Become ``command`` with the default signal dispositions."""
    # Python ignores these at start-up and exec keeps an ignored signal ignored: the command
    # gets the defaults, as from perl's supervisor (`yes | head` ends quietly).
    for number in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(number, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        os.write(2, f"dsh sandbox: cannot run {command[0]}: {exc.strerror}\n".encode())
    os._exit(127)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The supervisor a sandboxed ``bash`` command runs under, inside bubblewrap.

Run as ``python -I -S _sandbox_init.py STATUS_FD CONTROL_FD -- argv...``. Bubblewrap reports a
command killed by signal N as exit code 128+N and forwards no signal, while the ``bash`` tool
must tell ``kill -TERM $$`` from ``exit 143`` and give a timed-out command SIGTERM and a grace
period before SIGKILL (upstream's behaviour). This process, inside the sandbox, starts the
command as the leader of its own process group and:

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
import select
import signal
import sys

__all__ = ["main"]


def main(argv: list[str]) -> int:
    """Supervise ``argv[3:]``; the exit code (127 when the command cannot start)."""
    status_fd, control_fd, command = int(argv[0]), int(argv[1]), argv[3:]
    pid = os.fork()
    if pid == 0:
        try:
            os.close(status_fd)
            os.close(control_fd)
            os.setpgid(0, 0)
            # Python ignores these at start-up and exec keeps an ignored signal ignored: the
            # command gets the defaults, as from perl's supervisor (`yes | head` ends quietly).
            for number in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(number, signal.SIG_DFL)
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"dsh sandbox: cannot run {command[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    pidfd = os.pidfd_open(pid)
    watching = [pidfd, control_fd]
    while True:
        ready, _, _ = select.select(watching, [], [])
        if pidfd in ready:
            break
        data = os.read(control_fd, 64)
        if not data:
            watching.remove(control_fd)
            data = bytes([signal.SIGKILL])
        for number in data:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, number)
    _, status = os.waitpid(pid, 0)
    os.write(status_fd, f"{status}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Inside a sandbox without network: open the one port its command may reach, then exec it.

Run as ``python -I -S _sandbox_listen.py CHANNEL_FD PORT -- argv...`` inside bubblewrap's new
network namespace (whose loopback is the sandbox's own). It listens on ``127.0.0.1:PORT``
there, hands the listening socket to the host over ``CHANNEL_FD`` (a socket pair the host
made; ``SCM_RIGHTS``), closes its copies and execs the command. The host accepts on that socket
and relays each connection to the one service it chose (:class:`dsh_core.LoopbackForward`), so
``http://127.0.0.1:PORT`` inside reaches that service and nothing else is reachable at all.

Standard library only, nothing imported from the package: the interpreter starts with ``-I -S``.
"""

from __future__ import annotations

import os
import socket
import sys

__all__ = ["main"]


def main(argv: list[str]) -> int:
    """Listen, hand over, exec ``argv[3:]``; returns only on failure."""
    channel_fd, port, command = int(argv[0]), int(argv[1]), argv[3:]
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", port))
            listener.listen(8)  # dsh_core._sandbox_net.BACKLOG: what waits while the relay is full
            with socket.socket(fileno=channel_fd) as channel:
                socket.send_fds(channel, [b"listening"], [listener.fileno()])
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"dsh sandbox: cannot start {command[0]}: {exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

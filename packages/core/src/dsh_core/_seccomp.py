"""The seccomp filter every sandboxed process runs under, compiled by libseccomp.

Bubblewrap hides what lies outside a run, but a Unix socket needs no more than a path (or, for
an abstract one, a name) to be reached, and a read-only mount does not stop ``connect``: the
kernel checks write permission on the socket inode, not on the file system. The filter closes
what namespaces leave open:

- ``socket(AF_UNIX, …)`` fails with ``EAFNOSUPPORT``: no pathname socket anywhere on the host
  (docker.sock, the D-Bus and systemd buses, ssh-agent, gpg-agent) and no abstract socket can be
  connected to from inside. ``socketpair`` stays allowed (asyncio and libuv make their
  self-pipes and child pipes with it; a pair is connected only to itself);
- ``io_uring_setup``/``enter``/``register`` fail with ``ENOSYS``: io_uring makes and connects
  sockets without the ``socket`` system call;
- ``ioctl(TIOCSTI)`` and ``ioctl(TIOCLINUX)`` fail with ``EPERM``: nothing is typed into a
  terminal, even one reached through an inherited descriptor.

libseccomp (through ``pyseccomp``, a ctypes binding with libseccomp's own Python API) writes the
BPF program: it checks the architecture first, so a 32-bit or x32 system call cannot slip past
a rule written for x86-64 (a foreign architecture is killed).
"""

from __future__ import annotations

import errno
import functools
import importlib
import os
import socket
import sys
import termios
from typing import Any

__all__ = ["SeccompUnavailableError", "seccomp_program"]

# include/uapi/asm-generic/ioctls.h; termios does not export TIOCLINUX.
_TIOCLINUX = 0x541C


class SeccompUnavailableError(Exception):
    """libseccomp (or its binding) is missing or refused to build the filter."""


@functools.cache
def seccomp_program(*, unix_sockets: bool = False) -> bytes:
    """The filter as a BPF program (bubblewrap loads it with ``--seccomp FD``, a confined
    process with ``prctl``); built once per variant.

    Args:
        unix_sockets: leave ``socket(AF_UNIX)`` allowed (only for our own agent when its
            session store is a server reached over a Unix socket; never for a command).

    Raises:
        SeccompUnavailableError: not Linux, or libseccomp cannot be loaded (the message says
            how to install it).
    """
    if not sys.platform.startswith("linux"):
        raise SeccompUnavailableError(f"seccomp exists only on Linux, not {sys.platform}")
    try:
        seccomp: Any = importlib.import_module("pyseccomp")
    except (ImportError, OSError, RuntimeError) as exc:
        raise SeccompUnavailableError(
            f"libseccomp cannot be loaded ({exc}): install it (Debian/Ubuntu: apt-get install "
            "libseccomp2)"
        ) from None
    try:
        rules: Any = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
        if not unix_sockets:
            rules.add_rule(
                seccomp.ERRNO(errno.EAFNOSUPPORT),
                "socket",
                seccomp.Arg(0, seccomp.EQ, socket.AF_UNIX),
            )
        # io_uring creates and connects sockets without the socket system call (its
        # IORING_OP_SOCKET / IORING_OP_CONNECT), so the rule above would not see them: it does
        # not exist here, as in Docker's and Flatpak's default profiles (red team F2).
        for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
            rules.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
        for request in (termios.TIOCSTI, _TIOCLINUX):
            # The request is an int in the kernel; compare its low 32 bits only, as Flatpak's
            # filter does, so a sign-extended value cannot dodge the rule.
            rules.add_rule(
                seccomp.ERRNO(errno.EPERM),
                "ioctl",
                seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request),
            )
        read_end, write_end = os.pipe()
        with os.fdopen(write_end, "wb") as sink:
            rules.export_bpf(sink)
        with os.fdopen(read_end, "rb") as source:
            return source.read()
    except (OSError, RuntimeError, ValueError) as exc:
        raise SeccompUnavailableError(f"libseccomp could not build the filter: {exc}") from None

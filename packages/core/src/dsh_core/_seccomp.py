"""The seccomp filter every sandboxed process runs under, compiled by libseccomp.

Bubblewrap hides what lies outside a run, but namespaces leave kernel objects that are not
namespaced within reach, and a read-only mount does not stop ``connect`` (the kernel checks
write permission on the socket inode, not on the file system). The filter closes what
namespaces leave open (SECURITY.md, "The sandbox"; its rules follow Docker's and Flatpak's
default profiles):

- **socket families by allow-list**: ``socket`` only for ``AF_INET``, ``AF_INET6`` and
  ``AF_NETLINK`` with ``NETLINK_ROUTE`` (glibc's ``getaddrinfo``/``getifaddrs`` read the
  interfaces through it); everything else fails ``EAFNOSUPPORT``: ``AF_UNIX`` (a pathname or
  abstract socket of the host: docker.sock, D-Bus, ssh-agent), ``AF_VSOCK`` (not network
  namespaced: the hypervisor's services, red team 4 F6), ``AF_PACKET``, ``AF_ALG``,
  ``AF_XDP``, … and any value with high bits set (the kernel reads an ``int``).
  ``socketpair`` only for ``AF_UNIX`` (asyncio's and libuv's self-pipes and child pipes; a
  pair is connected only to itself);
- **no kernel keyring** (``add_key``, ``keyctl``, ``request_key`` → ``EPERM``): the session
  keyring is the gate's (``setsid`` does not give a new one), so its keys would be readable
  and a planted key would outlive the run (red team 4 F4);
- **no other process's memory** (``ptrace``, ``process_vm_readv``/``writev`` → ``EPERM``);
- **what a sandboxed program never needs and kernels keep getting wrong** (``ENOSYS``, as if
  the kernel lacked it): io_uring (it makes and connects sockets without ``socket``), ``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``kexec_*``, ``*_module``, ``open_by_handle_at``;
- **no terminal injection**: ``ioctl(TIOCSTI)`` and ``ioctl(TIOCLINUX)`` → ``EPERM``;
- for a **command** (not our own agent, which starts bubblewrap for its commands and so
  needs them): no mount or namespace calls (``mount``, ``umount2``, ``pivot_root``,
  ``chroot``, ``unshare``, ``setns`` and the new mount API → ``ENOSYS``).

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
from collections.abc import Iterable
from typing import Any

__all__ = [
    "ALLOWED_SOCKET_FAMILIES",
    "DENIED_SYSCALLS",
    "SeccompUnavailableError",
    "seccomp_program",
]

# include/uapi/asm-generic/ioctls.h; termios does not export TIOCLINUX.
_TIOCLINUX = 0x541C
_AF_NETLINK = 16
_NETLINK_ROUTE = 0

ALLOWED_SOCKET_FAMILIES = (socket.AF_INET, socket.AF_INET6, _AF_NETLINK)
"""What ``socket`` may create inside (``AF_UNIX`` joins them only for our own agent with a
server store); ``AF_NETLINK`` only with ``NETLINK_ROUTE``."""

# System call -> (errno, who it is denied to: "all" or "command" only). Each has a test in
# packages/core/tests/test_seccomp_policy.py.
DENIED_SYSCALLS: dict[str, tuple[int, str]] = {
    # The kernel keyring is not namespaced: the gate's session keyring is inherited.
    "add_key": (errno.EPERM, "all"),
    "keyctl": (errno.EPERM, "all"),
    "request_key": (errno.EPERM, "all"),
    # Another process's memory (the warm agent has no PID namespace of its own).
    "ptrace": (errno.EPERM, "all"),
    "process_vm_readv": (errno.EPERM, "all"),
    "process_vm_writev": (errno.EPERM, "all"),
    # io_uring creates and connects sockets without the socket system call (IORING_OP_SOCKET,
    # IORING_OP_CONNECT), past the family rule (red team 3 F2).
    "io_uring_setup": (errno.ENOSYS, "all"),
    "io_uring_enter": (errno.ENOSYS, "all"),
    "io_uring_register": (errno.ENOSYS, "all"),
    # Kernel attack surface nothing in a run uses (Docker's and Flatpak's profiles deny them).
    "bpf": (errno.ENOSYS, "all"),
    "perf_event_open": (errno.ENOSYS, "all"),
    "userfaultfd": (errno.ENOSYS, "all"),
    "kexec_load": (errno.ENOSYS, "all"),
    "kexec_file_load": (errno.ENOSYS, "all"),
    "init_module": (errno.ENOSYS, "all"),
    "finit_module": (errno.ENOSYS, "all"),
    "delete_module": (errno.ENOSYS, "all"),
    "open_by_handle_at": (errno.ENOSYS, "all"),
    # Mounts and namespaces: bubblewrap made the command's; it makes no more of its own. Our
    # agent keeps them: its commands' bubblewrap runs under its filter.
    "mount": (errno.ENOSYS, "command"),
    "umount2": (errno.ENOSYS, "command"),
    "pivot_root": (errno.ENOSYS, "command"),
    "chroot": (errno.ENOSYS, "command"),
    "unshare": (errno.ENOSYS, "command"),
    "setns": (errno.ENOSYS, "command"),
    "fsopen": (errno.ENOSYS, "command"),
    "fsconfig": (errno.ENOSYS, "command"),
    "fsmount": (errno.ENOSYS, "command"),
    "fspick": (errno.ENOSYS, "command"),
    "open_tree": (errno.ENOSYS, "command"),
    "move_mount": (errno.ENOSYS, "command"),
    "mount_setattr": (errno.ENOSYS, "command"),
}
"""Every system call the filter refuses outright, with its errno and whether our own agent
(``"all"``) or only a command (``"command"``) is refused it."""


class SeccompUnavailableError(Exception):
    """libseccomp (or its binding) is missing or refused to build the filter."""


@functools.cache
def seccomp_program(*, unix_sockets: bool = False, agent: bool = False) -> bytes:
    """The filter as a BPF program (bubblewrap loads it with ``--seccomp FD``, a confined
    process with ``prctl``); built once per variant.

    Args:
        unix_sockets: leave ``socket(AF_UNIX)`` allowed (only for our own agent when its
            session store is a server reached over a Unix socket; never for a command).
        agent: the variant for our own warm agent (``confine_process``), which starts
            bubblewrap for its commands: mounts and namespaces stay allowed to it.

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
        families = {*ALLOWED_SOCKET_FAMILIES, *([socket.AF_UNIX] if unix_sockets else [])}
        _allow_families_only(seccomp, rules, "socket", families)
        _allow_families_only(seccomp, rules, "socketpair", {socket.AF_UNIX})
        # Netlink's other protocols reach kernel subsystems (audit, uevents, sock_diag of the
        # host in record, …): only the routing tables glibc reads.
        rules.add_rule(
            seccomp.ERRNO(errno.EAFNOSUPPORT),
            "socket",
            seccomp.Arg(0, seccomp.EQ, _AF_NETLINK),
            seccomp.Arg(2, seccomp.NE, _NETLINK_ROUTE),
        )
        for name, (number, who) in DENIED_SYSCALLS.items():
            if who == "all" or not agent:
                rules.add_rule(seccomp.ERRNO(number), name)
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
            rules.export_bpf(sink)  # a few hundred instructions: never fills the pipe
        with os.fdopen(read_end, "rb") as source:
            return source.read()
    except (OSError, RuntimeError, ValueError) as exc:
        raise SeccompUnavailableError(f"libseccomp could not build the filter: {exc}") from None


def _allow_families_only(seccomp: Any, rules: Any, name: str, allowed: Iterable[int]) -> None:
    """Refuse ``name`` (``socket``/``socketpair``) for every family but ``allowed``, with
    ``EAFNOSUPPORT``: each family below the highest allowed one by value, and everything from
    there up by one comparison (which also catches a value whose high 32 bits are set: the
    kernel would read only the low ones), as Flatpak's filter does."""
    refuse = seccomp.ERRNO(errno.EAFNOSUPPORT)
    last = -1
    for family in sorted(allowed):
        for between in range(last + 1, family):
            rules.add_rule(refuse, name, seccomp.Arg(0, seccomp.EQ, between))
        last = family
    rules.add_rule(refuse, name, seccomp.Arg(0, seccomp.GE, last + 1))

"""The sandbox policy applied from inside a running process: our own warm-forked agent.

Bubblewrap confines a command it starts. The warm agent (``dsh_acp_agent``'s fork server) is
not started: it is forked from a pre-imported parent, and wrapping each fork in bubblewrap
would cost the interpreter start the fork server exists to save. So the child confines itself,
right after the fork and before it runs any agent code, with the parts of the same policy that
apply to a process already running (SECURITY.md, "The sandbox"):

- a new session (no controlling terminal; the caller does it, with the death signal);
- where unprivileged user namespaces exist, new user and IPC namespaces, and (``network``
  off: replay and refresh, whose model is a file) a new network namespace with not even a
  loopback up; the child's uid and gid map to themselves, then every capability is dropped
  (the bounding set too), unless the uid is 0: bubblewrap started by root needs them, and in
  a user namespace they govern only what it owns (root loses its host powers, e.g. reading
  another user's files);
- ``no_new_privs`` and the seccomp filter of :mod:`dsh_core._seccomp` in its agent variant
  (socket families by allow-list, ``AF_UNIX`` only when a server store must be reached over
  one; no kernel keyring, ``ptrace``, ``bpf``, ``TIOCSTI``…; mounts and namespaces stay, for
  the bubblewrap its commands run in), loaded with ``prctl`` from the BPF program libseccomp
  compiled once in the parent.

Inherited by everything the agent starts: its ``bash`` commands then enter bubblewrap from
inside these namespaces (a nested user namespace is allowed).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any, Literal, cast

from dsh_core._sandbox import ENABLE_USERNS_HINT, SandboxUnavailableError
from dsh_core._seccomp import SeccompUnavailableError, seccomp_program

__all__ = ["ProcessConfinement", "confine_process", "prepare_process_confinement"]

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

ConfinementMode = Literal["strict", "warn", "off"]


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


@dataclass(frozen=True)
class ProcessConfinement:
    """What a process applies to itself (see the module docstring).

    Attributes:
        network: keep the host's network (a live or scripted model client needs it); ``False``
            gives a network namespace of its own with nothing up.
        unix_sockets: allow ``socket(AF_UNIX)`` (a server store reached over a Unix socket).
        mode: ``strict`` (a missing mechanism is an error), ``warn`` (apply what exists, say
            once on stderr what is missing) or ``off`` (nothing; the caller's session and death
            signal still apply). As ``DSH_SANDBOX`` for commands.
    """

    network: bool = True
    unix_sockets: bool = False
    mode: ConfinementMode = "warn"

    def to_json(self) -> dict[str, Any]:
        """A JSON object :meth:`from_json` reads back."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> ProcessConfinement:
        """Read what :meth:`to_json` wrote.

        Raises:
            ValueError: not such an object.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a confinement must be a JSON object, not {type(data).__name__}")
        fields = cast(dict[str, Any], data)
        mode = fields.get("mode", "warn")
        if mode not in ("strict", "warn", "off"):
            raise ValueError(f"confinement mode must be strict, warn or off, not {mode!r}")
        return cls(
            network=bool(fields.get("network", True)),
            unix_sockets=bool(fields.get("unix_sockets", False)),
            mode=mode,
        )


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def prepare_process_confinement() -> None:
    """Do once, in a parent that forks many confined children, what costs time: load libc and
    let libseccomp compile both filters (a missing libseccomp is reported by the child)."""
    if not sys.platform.startswith("linux"):
        return
    _libc()
    for unix_sockets in (False, True):
        with contextlib.suppress(SeccompUnavailableError):
            seccomp_program(unix_sockets=unix_sockets, agent=True)


def confine_process(confinement: ProcessConfinement) -> list[str]:
    """Apply ``confinement`` to this process, for good (it cannot be undone).

    Call it in a single-threaded process (a user namespace refuses a threaded one), after
    ``setsid``.

    Returns:
        What could not be applied, each with why (empty: everything was), so a ``warn`` caller
        can say it.

    Raises:
        dsh_core.SandboxUnavailableError: ``strict`` and something is missing (one line: what,
            why and how to enable it).
    """
    if confinement.mode == "off":
        return []
    if not sys.platform.startswith("linux"):
        missing = [f"in-process confinement (Linux only, not {sys.platform})"]
    else:
        missing = _namespaces(confinement.network)
        missing += _seccomp(confinement.unix_sockets)
    if missing and confinement.mode == "strict":
        raise SandboxUnavailableError(
            f"agent confinement unavailable and DSH_SANDBOX=strict: {'; '.join(missing)}"
        )
    return missing


def _namespaces(network: bool) -> list[str]:
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    flags = _CLONE_NEWUSER | _CLONE_NEWIPC | (0 if network else _CLONE_NEWNET)
    if libc.unshare(flags) != 0:
        error = ctypes.get_errno()
        return [f"user namespaces (unshare: {os.strerror(error)}); {ENABLE_USERNS_HINT}"]
    try:
        # Our own ids only: what an unprivileged process may map. Files we own stay ours.
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1")):
            _write_proc(name, text)
        _write_proc("gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        return [f"user namespace id maps ({exc.strerror})"]
    # Root keeps its capabilities in the new namespace: bubblewrap, started by uid 0, needs
    # them to write its own maps. They reach only what this namespace owns (its network and
    # IPC namespaces, and files of mapped ids: root's own), never the host's.
    return _drop_capabilities() if uid != 0 else []


def _write_proc(name: str, text: str) -> None:
    fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _drop_capabilities() -> list[str]:
    """The new user namespace gave this process every capability in it: drop them all."""
    libc = _libc()
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as source:
            last = int(source.read())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # an unknown cap fails harmlessly
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        return [f"dropping capabilities (capset: {os.strerror(ctypes.get_errno())})"]
    return []


def _seccomp(unix_sockets: bool) -> list[str]:
    try:
        program = seccomp_program(unix_sockets=unix_sockets, agent=True)
    except SeccompUnavailableError as exc:
        return [f"the seccomp filter ({exc})"]
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return [f"no_new_privs ({os.strerror(ctypes.get_errno())})"]
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return [f"the seccomp filter (prctl: {os.strerror(ctypes.get_errno())})"]
    return []

"""Confine this process, then exec a command: the ``bash`` tool's sandbox wrapper.

Run as ``python -I -S _sandbox_exec.py [options] -- argv...`` (or ``python -m
dsh_core._sandbox_exec``). It is a fresh single-threaded process, which a new user namespace
requires, and the confinement it sets up survives ``execve`` and is inherited by every child:

- ``--netns``: a new user + network namespace (``unshare(CLONE_NEWUSER | CLONE_NEWNET)``) whose
  only interface, loopback, is down — no address, not even 127.0.0.1, is reachable;
- ``--landlock``: a Linux Landlock ruleset that leaves reads alone and allows writes only
  beneath each ``--write PATH`` (directories, or single device files such as ``/dev/null``);
  with ``--deny-tcp`` and Landlock ABI >= 4 it also refuses every TCP bind and connect.

``--probe`` prints one JSON object saying which mechanisms this system offers and exits.
A mechanism that was asked for and cannot be applied is fatal: one line on stderr, exit 126,
the command never runs unconfined.

Standard library only, and nothing imported from the package: the wrapper starts with ``-I -S``
so it costs one bare interpreter start-up per command.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import sys

__all__ = ["main"]

EXIT_CANNOT_CONFINE = 126

# Unified syscall numbers (the same on every architecture since Linux 5.13).
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000

# include/uapi/linux/landlock.h: filesystem rights (the ABI that introduced each).
_WRITE_FILE = 1 << 1
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1  # ABI 6

_WRITES_V1 = (
    _WRITE_FILE
    | _REMOVE_DIR
    | _REMOVE_FILE
    | _MAKE_CHAR
    | _MAKE_DIR
    | _MAKE_REG
    | _MAKE_SOCK
    | _MAKE_FIFO
    | _MAKE_BLOCK
    | _MAKE_SYM
)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel header
    _fields_ = [
        ("allowed_access", ctypes.c_uint64),
        ("parent_fd", ctypes.c_int32),
    ]


class ConfineError(Exception):
    """A mechanism that was asked for could not be applied."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise ConfineError(f"{what}: {os.strerror(errno)} (errno {errno})")
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is absent or disabled."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(
        ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(_CREATE_RULESET_VERSION),
    )
    return max(int(version), 0)


def apply_landlock(writable: list[str], *, deny_tcp: bool) -> None:
    """Allow writes only beneath ``writable``; with ``deny_tcp`` refuse TCP bind/connect.

    Raises:
        ConfineError: Landlock is missing, or a syscall failed (the message says which).
    """
    abi = landlock_abi()
    if abi < 1:
        raise ConfineError("Landlock is not available in this kernel")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    writes = _WRITES_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled_access_fs=writes)
    size = 8
    if deny_tcp and abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        # Signals and abstract unix sockets stay inside the sandbox's own processes.
        attr.scoped = _SCOPE_SIGNAL | (_SCOPE_ABSTRACT_UNIX_SOCKET if deny_tcp else 0)
        size = 24
    ruleset = _check(
        libc.syscall(
            ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
            ctypes.byref(attr),
            ctypes.c_size_t(size),
            ctypes.c_uint32(0),
        ),
        "landlock_create_ruleset",
    )
    try:
        for path in writable:
            _add_path_rule(libc, ruleset, path, writes)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(
            libc.syscall(
                ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF),
                ctypes.c_int(ruleset),
                ctypes.c_uint32(0),
            ),
            "landlock_restrict_self",
        )
    finally:
        os.close(ruleset)


def _add_path_rule(libc: ctypes.CDLL, ruleset: int, path: str, writes: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as error:
        raise ConfineError(f"cannot open writable path {path}: {error.strerror}") from None
    try:
        # A rule on a file may only carry the rights that apply to files.
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        allowed = writes if is_dir else writes & (_WRITE_FILE | _TRUNCATE)
        rule = _PathBeneathAttr(allowed_access=allowed, parent_fd=fd)
        _check(
            libc.syscall(
                ctypes.c_long(_SYS_LANDLOCK_ADD_RULE),
                ctypes.c_int(ruleset),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.byref(rule),
                ctypes.c_uint32(0),
            ),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(fd)


def enter_network_namespace() -> None:
    """Move into a new user + network namespace, keeping this uid and gid inside it.

    Raises:
        ConfineError: user namespaces are unavailable (the message says why).
    """
    if not sys.platform.startswith("linux"):
        raise ConfineError("network namespaces exist only on Linux")
    uid, gid = os.getuid(), os.getgid()
    _check(_libc().unshare(_CLONE_NEWUSER | _CLONE_NEWNET), "unshare(CLONE_NEWUSER|CLONE_NEWNET)")
    # Map our own ids to themselves so files and ``id`` look as they do outside.
    try:
        with open("/proc/self/setgroups", "w") as setgroups:
            setgroups.write("deny")
        with open("/proc/self/uid_map", "w") as uid_map:
            uid_map.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as gid_map:
            gid_map.write(f"{gid} {gid} 1")
    except OSError as error:
        raise ConfineError(f"cannot map ids in the new user namespace: {error}") from None


def probe() -> dict[str, object]:
    """What this system offers: ``{"landlock": abi, "netns": null | "why not"}``.

    Entering the namespace here is harmless: the probing process exits right after.
    """
    netns_problem: str | None = None
    try:
        enter_network_namespace()
    except ConfineError as error:
        netns_problem = str(error)
    return {"landlock": landlock_abi(), "netns": netns_problem}


def main(argv: list[str] | None = None) -> int:
    """Parse the options, confine, exec; returns only on failure (or after ``--probe``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--probe"]:
        print(json.dumps(probe()))
        return 0
    writable: list[str] = []
    want_landlock = want_netns = deny_tcp = False
    while args and args[0] != "--":
        option = args.pop(0)
        if option == "--write" and args:
            writable.append(args.pop(0))
        elif option == "--landlock":
            want_landlock = True
        elif option == "--netns":
            want_netns = True
        elif option == "--deny-tcp":
            deny_tcp = True
        else:
            print(f"dsh sandbox: unknown option {option!r}", file=sys.stderr)
            return 2
    command = args[1:]
    if not command:
        print("dsh sandbox: no command after '--'", file=sys.stderr)
        return 2
    try:
        if want_netns:
            enter_network_namespace()
        if want_landlock:
            apply_landlock(writable, deny_tcp=deny_tcp)
    except ConfineError as error:
        print(f"dsh sandbox: cannot confine the command: {error}", file=sys.stderr)
        return EXIT_CANNOT_CONFINE
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"dsh sandbox: cannot run {command[0]}: {error.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    raise SystemExit(main())

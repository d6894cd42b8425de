"""How a process confines itself: the system calls, with the standard library only.

Two callers apply the same plan: the warm agent's forked child, in process
(:func:`dsh_core._process_confine.confine_process`), and the cold agent's launcher, this file
run as a script before the agent starts (``python -I -S _self_confine.py PLAN -- ARGV``: it
applies the plan, then ``exec``s ``ARGV``; ``--cold`` and scenarios with a ``clock:``). Nothing
of the project is imported, so the launcher starts with no site (~40 ms CPU, its namespaces
included); the plan (a JSON object) is computed by the caller
(:func:`dsh_core._process_confine.confinement_plan`).

What :func:`apply` does, in this order, while the process is single-threaded:

1. new user, IPC, UTS and mount namespaces, and (``network`` false) a network namespace with not
   even its loopback up; the uid and gid map to themselves (files written stay the caller's);
2. the file system, as bubblewrap builds it for a command: every mount made
   read-only (``mount_setattr(AT_RECURSIVE)``; ``/proc`` excepted, or a nested bubblewrap
   could not mount its own), so writes, ``chmod``, ``chown``, ``utime`` and xattr changes
   anywhere fail with ``EROFS``; the ``hide`` paths covered by an empty read-only tmpfs (a
   file: by ``/dev/null``); each ``readable`` path that a hidden one covers brought back
   read-only, each ``writable`` one brought back writable (both as detached copies of their
   original mount tree, ``open_tree(OPEN_TREE_CLONE)``, taken before anything is hidden and
   attached with ``move_mount``). Landlock would not do: it governs no metadata change on any
   ABI, and a process in a Landlock domain that handles file-system access may not mount
   (the agent's commands start bubblewrap, which must);
3. the mounts made final: a non-root process drops every capability (the bounding set too);
   root (bubblewrap, started by uid 0, needs its capabilities) moves into a second user
   namespace, whose capabilities do not reach the mount namespace (owned by the first): no
   remount or unmount undoes the policy, and a mount namespace it (or a bubblewrap it starts)
   makes is a copy whose every flag and mount the kernel locks (``MNT_LOCK_READONLY``,
   ``MNT_LOCKED``);
4. ``no_new_privs``; Landlock scoping where the kernel has ABI 6 or later (no signal to a
   process outside, no abstract Unix socket created outside: the gate, the user's other
   processes); then the seccomp BPF program the caller compiled (``seccomp``, base64).

Each step that is unavailable is returned as one line saying what and why; the caller decides
(``strict``: fail; ``warn``: say it). Landlock scoping is an extra layer, not reported missing.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import functools
import json
import os
import sys
from typing import Any

__all__ = ["apply", "main"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUTS = 0x04000000
_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_SLAVE = 2, 4, 4096, 16384, 1 << 19
# System calls newer than 5.0 share one number on every architecture but alpha.
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_RESTRICT_SELF = 444, 446
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 1, os.O_CLOEXEC
_AT_FDCWD, _AT_EMPTY_PATH, _AT_RECURSIVE = -100, 0x1000, 0x8000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_RDONLY = 0x1
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, _LANDLOCK_SCOPE_SIGNAL = 1, 2
EX_OSERR = 71
"""The exit code of a launcher (or forked child) that may not run unconfined."""


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


class _LandlockRulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


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


class _Failed(Exception):
    """One step failed: the message says which and why."""


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        raise _Failed(f"{what}: {os.strerror(ctypes.get_errno())}")
    return result


def _syscall(number: int, *args: Any) -> int:
    return int(_libc().syscall(ctypes.c_long(number), *args))


def _path(path: str) -> bytes:
    return os.fsencode(path)


def _mount_setattr(path: str, attr_set: int, attr_clr: int, fd: int = _AT_FDCWD) -> None:
    attr = _MountAttr(attr_set, attr_clr, 0, 0)
    flags = _AT_RECURSIVE | (_AT_EMPTY_PATH if fd != _AT_FDCWD else 0)
    _check(
        _syscall(
            _SYS_MOUNT_SETATTR,
            ctypes.c_int(fd),
            _path(path),
            ctypes.c_uint(flags),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        ),
        f"mount_setattr {path or fd}",
    )


def _write_proc(name: str, text: str) -> None:
    fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _enter_user_namespace(flags: int) -> None:
    uid, gid = os.getuid(), os.getgid()
    _check(_libc().unshare(ctypes.c_int(_CLONE_NEWUSER | flags)), "unshare")
    try:
        # Our own ids only: what an unprivileged process may map. Files we own stay ours.
        _write_proc("setgroups", "deny")
        _write_proc("uid_map", f"{uid} {uid} 1")
        _write_proc("gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        raise _Failed(f"user namespace id maps ({exc.strerror})") from None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def _mountpoint(path: str, like_dir: bool) -> None:
    """Make ``path`` exist (in a hidden tmpfs) so something can be mounted on it."""
    if os.path.lexists(path):
        return
    os.makedirs(path if like_dir else os.path.dirname(path), exist_ok=True)
    if not like_dir:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))


class _HalfWay(Exception):
    """The file system was changed in part: the process must not run on (any mode)."""


def _file_system(plan: dict[str, Any]) -> None:
    """Step 2 (module docstring).

    Raises:
        _Failed: a mechanism is missing (an old kernel without ``open_tree`` or
            ``mount_setattr``); nothing visible has changed yet.
        _HalfWay: a later step failed.
    """
    libc = _libc()
    hidden = [
        (path, os.path.isdir(path))
        for path in dict.fromkeys(plan.get("hide", []))
        if os.path.isabs(path) and not os.path.islink(path) and os.path.exists(path)
    ]
    writable = [p for p in plan.get("writable", []) if os.path.isdir(p)]
    covered = [
        p
        for p in dict.fromkeys(plan.get("readable", []))
        if os.path.exists(p) and any(_inside(p, h) for h, _ in hidden)
    ]
    # One copy per tree: a folder inside another one brought back comes with it (unless a
    # hidden folder lies between them). Fewer mounts: each costs every nested bubblewrap too.
    readable = [
        p
        for p in covered
        if not any(
            q != p and _inside(p, q) and not any(_inside(h, q) and _inside(p, h) for h, _ in hidden)
            for q in covered
        )
    ]
    # Take the copies first: once something is hidden, what it covers cannot be reached.
    copies: dict[str, int] = {}
    is_dir: dict[str, bool] = {}
    try:
        for path in [*writable, *readable]:
            if path not in copies:
                is_dir[path] = os.path.isdir(path)
                flags = _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_RECURSIVE
                args = (ctypes.c_int(_AT_FDCWD), _path(path), ctypes.c_uint(flags))
                copies[path] = _check(_syscall(_SYS_OPEN_TREE, *args), f"open_tree {path}")
        # Nothing done here reaches the caller's namespace.
        _check(libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None), "mount --make-rslave /")
        _mount_setattr("/", 0, 0)  # a kernel before 5.12 has no mount_setattr: say so now
    except _Failed:
        for fd in copies.values():
            os.close(fd)
        raise
    try:
        # Outer paths first, so that what lies inside lands on top; a copy after a hide of
        # the same depth (a kept folder that is itself hidden comes back).
        steps = sorted(
            [(_depth(p), 0, p) for p, _ in hidden] + [(_depth(p), 1, p) for p in copies],
        )
        kinds = dict(hidden)
        for _, is_copy, path in steps:
            if is_copy:
                _mountpoint(path, is_dir[path])
                args = (
                    ctypes.c_int(copies[path]),
                    b"",
                    ctypes.c_int(_AT_FDCWD),
                    _path(path),
                    ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH),
                )
                _check(_syscall(_SYS_MOVE_MOUNT, *args), f"move_mount {path}")
            elif not os.path.lexists(path):
                continue  # inside a folder hidden already (and not brought back)
            elif kinds[path]:
                what = f"hiding {path}"
                _check(libc.mount(b"tmpfs", _path(path), b"tmpfs", 0, b"mode=0755"), what)
            else:
                _check(
                    libc.mount(b"/dev/null", _path(path), None, _MS_BIND, None), f"hiding {path}"
                )
        _mount_setattr("/", _MOUNT_ATTR_RDONLY, 0)
        # A nested bubblewrap (the agent's commands) mounts its own /proc, which the kernel
        # allows only where the host's is visible and no more restricted than the new one.
        _mount_setattr("/proc", 0, _MOUNT_ATTR_RDONLY)
        for path in sorted(writable, key=_depth):
            _mount_setattr(path, 0, _MOUNT_ATTR_RDONLY)
        for path in readable:  # one that lies inside a writable folder is still read-only
            if any(_inside(path, w) for w in writable):
                _mount_setattr(path, _MOUNT_ATTR_RDONLY, 0)
    except (_Failed, OSError) as exc:
        raise _HalfWay(str(exc)) from None
    finally:
        for fd in copies.values():
            os.close(fd)


def _drop_capabilities() -> None:
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
    _check(libc.capset(ctypes.byref(header), data), "dropping capabilities (capset)")


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or it is disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint(1))
    return max(version, 0)


def _landlock_scope() -> None:
    """A Landlock domain that handles no file-system access (so bubblewrap may still mount)
    but scopes signals and abstract Unix sockets to itself. Needs ABI 6; skipped below."""
    if landlock_abi() < 6:
        return
    attr = _LandlockRulesetAttr(0, 0, _LANDLOCK_SCOPE_SIGNAL | _LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET)
    size = ctypes.c_size_t(ctypes.sizeof(attr))
    ruleset = _check(
        _syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, ctypes.c_uint(0)),
        "landlock_create_ruleset",
    )
    try:
        _check(
            _syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint(0)),
            "landlock_restrict_self",
        )
    finally:
        os.close(ruleset)


def _seccomp(program: bytes) -> None:
    libc = _libc()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(
        libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0),
        "the seccomp filter (prctl)",
    )


def apply(plan: dict[str, Any]) -> list[str]:
    """Apply ``plan`` to this process, for good (the module docstring says how).

    ``plan``: ``network`` (keep the host's), ``writable``,
    ``readable`` and ``hide`` (absolute paths), ``seccomp`` (the BPF program, base64, or
    ``None``) and ``seccomp_problem`` (why there is none).

    Returns:
        What could not be applied, each with why (empty: everything was).
    """
    if not sys.platform.startswith("linux"):
        return [f"in-process confinement (Linux only, not {sys.platform})"]
    missing: list[str] = []
    flags = _CLONE_NEWIPC | _CLONE_NEWUTS | _CLONE_NEWNS
    flags |= 0 if plan.get("network", True) else _CLONE_NEWNET
    try:
        _enter_user_namespace(flags)
    except _Failed as exc:
        missing.append(f"user namespaces ({exc}); {plan.get('userns_hint', '')}".rstrip("; "))
    else:
        try:
            _file_system(plan)
        except _Failed as exc:
            missing.append(f"the file-system confinement ({exc})")
        except _HalfWay as exc:
            # Half a file system is worse than none: the caller must not run on.
            raise SystemError(f"the file-system confinement failed half way: {exc}") from None
        try:
            if os.getuid() == 0:
                _enter_user_namespace(0)  # seals the mounts (module docstring)
            else:
                _drop_capabilities()
        except _Failed as exc:
            missing.append(f"sealing the namespaces ({exc})")
    if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        missing.append(f"no_new_privs ({os.strerror(ctypes.get_errno())})")
    with contextlib.suppress(_Failed):
        _landlock_scope()
    program = plan.get("seccomp")
    if program:
        try:
            _seccomp(base64.b64decode(program))
        except _Failed as exc:
            missing.append(str(exc))
    else:
        missing.append(str(plan.get("seccomp_problem") or "the seccomp filter"))
    return missing


def die_with_parent() -> None:
    """Be killed when the parent dies (bubblewrap's ``--die-with-parent``). Call it after
    :func:`apply`: new credentials clear it."""
    if sys.platform.startswith("linux"):
        _libc().prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)


def main(argv: list[str]) -> int:
    """``_self_confine.py PLAN -- ARGV``: a session of its own, the plan applied (strict: or
    exit 71 saying why, in one line), then ``ARGV`` in place of this process."""
    if len(argv) < 3 or argv[1] != "--":
        print("usage: _self_confine.py PLAN -- ARGV...", file=sys.stderr)
        return 2
    plan = json.loads(argv[0])
    parent = os.getppid()
    with contextlib.suppress(OSError):
        os.setsid()  # no controlling terminal (bubblewrap's --new-session)
    try:
        missing = apply(plan)
    except SystemError as exc:
        missing, plan["mode"] = [str(exc)], "strict"
    if missing and plan.get("mode") == "strict":
        print(
            f"dsh-acp-agent: agent confinement unavailable and DSH_SANDBOX=strict: "
            f"{'; '.join(missing)}",
            file=sys.stderr,
        )
        return EX_OSERR
    if missing:
        print(f"dsh-acp-agent: confined without {'; '.join(missing)}", file=sys.stderr)
    die_with_parent()
    if os.getppid() != parent:  # the parent died before the signal was armed
        return EX_OSERR
    # The cwd was resolved before the mounts changed: enter it again, through them.
    with contextlib.suppress(OSError):
        os.chdir(os.getcwd())
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        print(f"dsh-acp-agent: cannot start {argv[2]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

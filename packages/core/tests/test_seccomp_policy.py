"""The seccomp filter, rule by rule, in both places it is loaded: bubblewrap's ``--seccomp``
(a command) and ``confine_process`` (our own warm agent's child).

One probe tries every rule's system call with arguments that do nothing even where the call
is allowed (invalid flags, a missing name, our own pid), and prints what each returned. It runs
three times: unconfined (the control: each call must answer otherwise there, so a test can
fail), under bubblewrap and in a process that confined itself. Each rule is then one test.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_core import SandboxSettings, ToolSandbox
from dsh_core._seccomp import DENIED_SYSCALLS

pytestmark = pytest.mark.usefixtures("needs_sandbox")
PY = sys.executable

# name -> (system call, arguments). Strings are passed as C strings, None as NULL, "PID" as
# the probe's own pid; every call is harmless when allowed (the control runs them for real).
_CALLS: dict[str, tuple[str, list[Any]]] = {
    "add_key": ("add_key", ["user", "dsh-probe", "x", 1, -2]),  # the process keyring
    "keyctl": ("keyctl", [0, -3, 0]),  # KEYCTL_GET_KEYRING_ID of the session keyring
    "request_key": ("request_key", ["user", "dsh-probe-absent", None, 0]),
    "ptrace": ("ptrace", [0x7FFF, "PID", 0, 0]),  # an unknown request
    "process_vm_readv": ("process_vm_readv", ["PID", None, 0, None, 0, 0]),
    "process_vm_writev": ("process_vm_writev", ["PID", None, 0, None, 0, 0]),
    "io_uring_setup": ("io_uring_setup", [0, None]),
    "io_uring_enter": ("io_uring_enter", [-1, 0, 0, 0, None, 0]),
    "io_uring_register": ("io_uring_register", [-1, 0, None, 0]),
    "bpf": ("bpf", [0xFFFF, None, 0]),
    "perf_event_open": ("perf_event_open", [None, 0, -1, -1, 0]),
    "userfaultfd": ("userfaultfd", [0xFFFFFFF]),
    "kexec_load": ("kexec_load", [0, 0, None, 0xFFFFFFFF]),
    "kexec_file_load": ("kexec_file_load", [-1, -1, 0, None, 0xFFFFFFFF]),
    "init_module": ("init_module", [None, 0, None]),
    "finit_module": ("finit_module", [-1, "", 0]),
    "delete_module": ("delete_module", ["dsh-no-such-module", 0]),
    "open_by_handle_at": ("open_by_handle_at", [-1, None, 0]),
    "mount": ("mount", [None, None, None, 0, None]),
    "umount2": ("umount2", [None, 0]),
    "pivot_root": ("pivot_root", [None, None]),
    "chroot": ("chroot", [None]),
    "unshare": ("unshare", [0]),
    "setns": ("setns", [-1, 0]),
    "fsopen": ("fsopen", [None, 0]),
    "fsconfig": ("fsconfig", [-1, 0, None, None, 0]),
    "fsmount": ("fsmount", [-1, 0, 0]),
    "fspick": ("fspick", [-1, None, 0]),
    "open_tree": ("open_tree", [-1, None, 0]),
    "move_mount": ("move_mount", [-1, None, -1, None, 0]),
    "mount_setattr": ("mount_setattr", [-1, None, 0, None, 0]),
}
_AF_NETLINK, _AF_VSOCK, _AF_ALG, _AF_PACKET = 16, 40, 38, 17
# name -> (system call, arguments, allowed inside?)
_SOCKETS: dict[str, tuple[str, list[Any], bool]] = {
    "socket-inet": ("socket", [socket.AF_INET, socket.SOCK_STREAM, 0], True),
    "socket-inet6": ("socket", [socket.AF_INET6, socket.SOCK_DGRAM, 0], True),
    "socket-netlink-route": ("socket", [_AF_NETLINK, socket.SOCK_RAW, 0], True),
    "socketpair-unix": ("socketpair", [socket.AF_UNIX, socket.SOCK_STREAM, 0, "PAIR"], True),
    "socket-unix": ("socket", [socket.AF_UNIX, socket.SOCK_STREAM, 0], False),
    "socket-vsock": ("socket", [_AF_VSOCK, socket.SOCK_STREAM, 0], False),
    "socket-alg": ("socket", [_AF_ALG, socket.SOCK_SEQPACKET, 0], False),
    "socket-packet": ("socket", [_AF_PACKET, socket.SOCK_DGRAM, 0], False),
    "socket-netlink-uevent": ("socket", [_AF_NETLINK, socket.SOCK_RAW, 15], False),
    # AF_INET to the kernel (it reads an int), not to a comparison of all 64 bits.
    "socket-inet-high-bits": ("socket", [(1 << 32) | socket.AF_INET, socket.SOCK_STREAM, 0], False),
    "socketpair-inet": ("socketpair", [socket.AF_INET, socket.SOCK_STREAM, 0, "PAIR"], False),
}

_PROBE = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
calls = json.loads(sys.argv[1])
pair = (ctypes.c_int * 2)()
def arg(value):
    if value is None: return ctypes.c_void_p(None)
    if value == "PID": return ctypes.c_long(os.getpid())
    if value == "PAIR": return pair
    if isinstance(value, str): return ctypes.c_char_p(value.encode())
    return ctypes.c_long(value)
seen = {}
for name, (number, args) in calls.items():
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *[arg(a) for a in args])
    seen[name] = "ok" if result >= 0 else ctypes.get_errno()
print(json.dumps(seen))
"""

_CONFINE = r"""
import os, sys
from dsh_core import ProcessConfinement, confine_process
os.setsid()
confine_process(ProcessConfinement(network=False, mode="strict"))
os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", sys.argv[1], sys.argv[2]])
"""


def _numbered() -> str:
    seccomp: Any = pytest.importorskip("pyseccomp")
    table = {n: (c, a) for n, (c, a) in _CALLS.items()}
    table |= {n: (c, a) for n, (c, a, _) in _SOCKETS.items()}
    return json.dumps({n: (seccomp.resolve_syscall(None, c), a) for n, (c, a) in table.items()})


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """What each call answered: ``unconfined``, under ``bwrap``, in a ``confined`` process."""
    calls = _numbered()
    run = tmp_path_factory.mktemp("run")

    def probe(argv: list[str], **kwargs: Any) -> dict[str, Any]:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, check=False, **kwargs
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    sandbox = ToolSandbox(SandboxSettings(sandbox="strict", sandbox_network="deny"))
    confined = sandbox.confine([PY, "-I", "-S", "-c", _PROBE, calls], str(run))
    try:
        bwrap = probe(confined.argv, env=confined.env, cwd=run, pass_fds=confined.pass_fds)
    finally:
        confined.close()
    return {
        "unconfined": probe([PY, "-I", "-S", "-c", _PROBE, calls]),
        "bwrap": bwrap,
        "confined": probe([PY, "-c", _CONFINE, _PROBE, calls], cwd=run),
    }


def _absent(seen: dict[str, dict[str, Any]], name: str) -> bool:
    return seen["unconfined"][name] == errno.ENOSYS  # this kernel lacks the call


@pytest.mark.parametrize("name", sorted(DENIED_SYSCALLS))
def test_each_denied_system_call_is_refused(seen: dict[str, dict[str, Any]], name: str) -> None:
    number, who = DENIED_SYSCALLS[name]
    if _absent(seen, name):
        pytest.skip(f"this kernel has no {name}")
    # The control: unconfined, the call answers otherwise, so the filter made the difference.
    assert seen["unconfined"][name] != number
    assert seen["bwrap"][name] == number
    if who == "all":
        assert seen["confined"][name] == number
    else:  # our agent keeps it: the bubblewrap of its commands runs under its filter
        assert seen["confined"][name] != number


def test_every_denied_system_call_is_probed() -> None:
    assert set(_CALLS) == set(DENIED_SYSCALLS)


@pytest.mark.parametrize("name", sorted(_SOCKETS))
def test_socket_families_are_an_allow_list(seen: dict[str, dict[str, Any]], name: str) -> None:
    allowed = _SOCKETS[name][2]
    for where in ("bwrap", "confined"):
        assert seen[where][name] == ("ok" if allowed else errno.EAFNOSUPPORT), where
    if not allowed and seen["unconfined"][name] == errno.EAFNOSUPPORT:
        pytest.skip(f"the control: this kernel has no such family ({name})")
    if not allowed:
        assert seen["unconfined"][name] != errno.EAFNOSUPPORT  # the control


def test_vsock_is_refused_although_the_host_has_it(seen: dict[str, dict[str, Any]]) -> None:
    # Red team 4 F6: AF_VSOCK is not network-namespaced (the hypervisor's port space).
    if seen["unconfined"]["socket-vsock"] != "ok":
        pytest.skip("no AF_VSOCK on this host")
    assert seen["bwrap"]["socket-vsock"] == errno.EAFNOSUPPORT
    assert seen["confined"]["socket-vsock"] == errno.EAFNOSUPPORT


_KEYRING = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
found = libc.syscall(250, 10, ctypes.c_long(-3), b"user", sys.argv[1].encode(), 0)
print("found" if found > 0 else os.strerror(ctypes.get_errno()))
planted = libc.syscall(248, b"user", b"dsh-planted", b"x", 1, ctypes.c_long(-3))
print("planted" if planted > 0 else os.strerror(ctypes.get_errno()))
"""


_HOLDER = r"""
import ctypes, json, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(250, 1, b"dsh-test-session") > 0  # KEYCTL_JOIN_SESSION_KEYRING
assert libc.syscall(248, b"user", sys.argv[1].encode(), b"secret", 6, ctypes.c_long(-3)) > 0
run = json.loads(sys.argv[2])
done = subprocess.run(run["argv"], env=run["env"], pass_fds=run["fds"], capture_output=True,
                      text=True)
left = libc.syscall(250, 10, ctypes.c_long(-3), b"user", b"dsh-planted", 0)
print(done.stdout + ("left" if left > 0 else "none"))
"""


def _held(
    name: str, argv: list[str], env: dict[str, str] | None = None, fds: tuple[int, ...] = ()
) -> list[str]:
    """Run ``argv`` from a process whose session keyring holds the key ``name``; what it
    printed, then whether the key it tried to plant is in that keyring afterwards."""
    run = json.dumps({"argv": argv, "env": env, "fds": list(fds)})
    done = subprocess.run(
        [PY, "-c", _HOLDER, name, run],
        capture_output=True,
        text=True,
        pass_fds=fds,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_session_keyring_is_neither_read_nor_written(tmp_path: Path) -> None:
    """Red team 4 F4: a key in the caller's session keyring; a command searches for it and
    plants one of its own. Nothing is found, nothing is left behind."""
    if os.uname().machine != "x86_64":
        pytest.skip("the probe names x86-64 system call numbers")
    name = f"dsh-secret-{os.getpid()}"
    probe = [PY, "-I", "-S", "-c", _KEYRING, name]
    assert _held(name, probe) == ["found", "planted", "left"]  # the control
    eperm = os.strerror(errno.EPERM)
    sandbox = ToolSandbox(SandboxSettings(sandbox="strict", sandbox_network="deny"))
    confined = sandbox.confine(probe, str(tmp_path))
    try:
        in_bwrap = _held(name, confined.argv, confined.env, confined.pass_fds)
    finally:
        confined.close()
    assert in_bwrap == [eperm, eperm, "none"]
    in_agent = _held(name, [PY, "-c", _CONFINE, _KEYRING, name], dict(os.environ))
    assert in_agent == [eperm, eperm, "none"]

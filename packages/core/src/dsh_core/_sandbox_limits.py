"""The resource limits a sandboxed command runs under: it must not exhaust the host.

bubblewrap confines what a command may touch, not how much it may use. Each command (and a
foreign agent) gets, per process, set inside the sandbox by its first process (the supervisor,
or a small limits stage before the command) with the hard limit equal to the soft one, so
nothing inside can raise them again:

- ``RLIMIT_DATA`` (memory): private writable memory, heap and anonymous mappings. Not
  ``RLIMIT_AS``: node reserves address space it never uses (a WebAssembly memory asks for
  10 GiB of it) and Qwen Code does not start under a few GiB of ``RLIMIT_AS``;
- ``RLIMIT_FSIZE`` (file size): a write past it fails (``SIGXFSZ`` / ``EFBIG``);
- ``RLIMIT_NPROC`` (processes and threads): counted, since Linux 5.14, per user namespace, so
  set inside bubblewrap's namespace it caps that sandbox alone (on an older kernel the count
  is the user's across the host: the cap is added to the user's processes at start);
- ``RLIMIT_NOFILE`` (open files) and ``RLIMIT_CORE`` 0 (no core dump reaches the host's
  ``core_pattern``, which may be a pipe to a host program).

``/dev/shm`` is a tmpfs capped at its own size (:func:`dsh_core._sandbox_fs.bwrap_options`).
A cgroup would cap the total across processes; none is used (SECURITY.md says why).
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
from dataclasses import dataclass

__all__ = ["ResourceLimits", "prlimit_syscall"]

# prlimit64's number per architecture (the perl supervisor calls it through `syscall`, perl
# having no setrlimit of its own); where it is not known the Python supervisor is used.
_PRLIMIT64 = {
    "x86_64": 302,
    "aarch64": 261,
    "riscv64": 261,
    "loongarch64": 261,
    "ppc64le": 325,
    "ppc64": 325,
    "s390x": 334,
}
# RLIMIT_NPROC is counted per user namespace from this release on (the "ucounts" rework).
_NPROC_PER_NAMESPACE: tuple[int, int] = (5, 14)


def prlimit_syscall() -> int | None:
    """prlimit64's system call number on this machine (64-bit Linux), ``None`` if unknown."""
    return _PRLIMIT64.get(platform.machine())


@dataclass(frozen=True)
class ResourceLimits:
    """What one sandboxed process may use (0: leave the host's limit as it is).

    Attributes:
        memory: bytes of private writable memory (``RLIMIT_DATA``).
        file_size: bytes of one file written (``RLIMIT_FSIZE``).
        processes: processes and threads of the sandbox (``RLIMIT_NPROC``).
        open_files: descriptors of one process (``RLIMIT_NOFILE``).
        shm: bytes of ``/dev/shm``.
    """

    memory: int = 4 << 30
    file_size: int = 1 << 30
    processes: int = 512
    open_files: int = 4096
    shm: int = 64 << 20

    def rlimits(self) -> list[tuple[int, int]]:
        """``(resource, value)`` to set, soft and hard alike; never above the host's hard
        limit (a lower one is kept: nothing inside could raise it)."""
        wanted = [
            (resource.RLIMIT_DATA, self.memory),
            (resource.RLIMIT_FSIZE, self.file_size),
            (resource.RLIMIT_NPROC, self.processes + _host_processes() if self.processes else 0),
            (resource.RLIMIT_NOFILE, self.open_files),
        ]
        chosen = [(resource.RLIMIT_CORE, 0)]
        for kind, value in wanted:
            if value <= 0:
                continue
            hard = resource.getrlimit(kind)[1]
            chosen.append((kind, value if hard == resource.RLIM_INFINITY else min(value, hard)))
        return chosen

    @property
    def watched(self) -> int:
        """The process cap the supervisor watches for itself (0: none): where the host's root
        runs the sandbox, which ``RLIMIT_NPROC`` never stops."""
        return self.processes if os.geteuid() == 0 else 0

    def spec(self) -> str:
        """The limits as the supervisors read them: ``RESOURCE=VALUE,…:CAP``."""
        listed = ",".join(f"{kind}={value}" for kind, value in self.rlimits())
        return f"{listed}:{self.watched}"


def _host_processes() -> int:
    """0 where ``RLIMIT_NPROC`` counts the sandbox's own namespace; on an older kernel, the
    processes this user has across the host (the count the limit is compared with)."""
    release = platform.release().split("-")[0].split(".")
    version: tuple[int, int] = (0, 0)
    with contextlib.suppress(IndexError, ValueError):
        version = (int(release[0]), int(release[1]))
    if version >= _NPROC_PER_NAMESPACE:
        return 0
    uid = os.getuid()
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                count += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                continue
    return count

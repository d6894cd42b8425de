"""What a tool's child process gets: an allow-listed environment and a bubblewrap sandbox.

A command the model (or a recorded scenario) runs, and a foreign agent a scenario names, must
not see the agent's secrets nor touch what lies outside its run. :class:`ToolSandbox` owns one
run's private directories (a home and a temp dir, removed when the run ends), builds the
child's environment from an allow-list and wraps the command in bubblewrap (``bwrap``, what
Flatpak uses) with one policy (SECURITY.md, "The sandbox"):

- the host file system read-only (so writes, ``chmod``, ``utime`` and xattrs outside fail),
  only the run's cwd and the private home and temp dir writable; the host's ``/tmp``,
  ``/var/tmp``, ``/run`` (``/var/run``), ``$XDG_RUNTIME_DIR`` and every home (``/root``,
  ``/home``, ``$HOME``) are hidden behind empty ones, a home lending back read-only only what
  the programs on ``PATH`` need (:mod:`dsh_core._sandbox_fs`);
- resource limits per process (memory, file size, processes, open files, no core dump) and a
  size-capped ``/dev/shm`` (:mod:`dsh_core._sandbox_limits`);
- new user, PID, IPC, UTS and cgroup namespaces, and (network ``deny``) a new network namespace
  whose only interface is its own loopback;
- ``--new-session`` (no controlling terminal), ``--die-with-parent`` and PID 1 of its own
  namespace (nothing outlives the command), ``--cap-drop ALL``, ``--disable-userns``,
  ``--clearenv`` and only the allow-listed variables;
- a seccomp filter (:mod:`dsh_core._seccomp`): socket families by allow-list (no
  ``AF_UNIX``, no ``AF_VSOCK``), no kernel keyring, ``ptrace``, ``bpf``, mounts, ``TIOCSTI``….

Settings (``DSH_*``, read by :class:`SandboxSettings`):

- ``DSH_SANDBOX``: ``strict`` (a missing mechanism fails the command), ``warn`` (the default:
  run with what exists and say once, on stderr, what is missing) or ``off`` (unconfined;
  the environment is still allow-listed);
- ``DSH_SANDBOX_NETWORK``: ``allow`` (the default) or ``deny``;
- ``DSH_TOOL_ENV_ALLOW``: comma-separated extra variable names to pass; credential-shaped
  names are dropped even when listed here;
- ``DSH_SANDBOX_HIDE``: further folders to hide (``os.pathsep``-separated): the gate names the
  checkout it runs from, whose ``.env`` and ``.git`` a command must not read;
- ``DSH_SANDBOX_MEMORY`` (default 4 GiB), ``DSH_SANDBOX_FILE_SIZE`` (1 GiB),
  ``DSH_SANDBOX_PROCESSES`` (512), ``DSH_SANDBOX_OPEN_FILES`` (4096), ``DSH_SANDBOX_SHM``
  (64 MiB): the resource limits (0 keeps the host's).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ByteSize, NonNegativeInt
from pydantic_settings import BaseSettings, SettingsConfigDict

from dsh_core._sandbox_fs import bwrap_options
from dsh_core._sandbox_limits import ResourceLimits, prlimit_syscall
from dsh_core._sandbox_net import LoopbackForward
from dsh_core._seccomp import SeccompUnavailableError, seccomp_program

__all__ = [
    "ConfinedCommand",
    "SandboxMechanisms",
    "SandboxSettings",
    "SandboxUnavailableError",
    "ToolSandbox",
    "host_which",
    "is_secret_name",
    "tool_environment",
]

SandboxMode = Literal["strict", "warn", "off"]
NetworkMode = Literal["allow", "deny"]

_PASSED_NAMES = frozenset({"PATH", "LANG", "LANGUAGE", "TERM", "TZ"})
_PASSED_PREFIXES = ("LC_",)
# Ours and the clouds' / CI's; every installed model provider's prefix joins them
# (_provider_names): no vendor is named here.
_NEVER_PREFIXES = ("DSH_", "OPENAI_", "AWS_", "GOOGLE_", "AZURE_", "GCP_", "GH_")
# Names that look like they hold a credential, wherever the word sits in the name.
_SECRET_WORDS = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|PRIVATE|SESSION|JWT",
    re.IGNORECASE,
)
ENABLE_USERNS_HINT = (
    "allow unprivileged user namespaces (Ubuntu 24.04: "
    "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0; see README, 'The sandbox')"
)
INSTALL_BWRAP_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
_LAUNCHER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
_INIT = Path(__file__).with_name("_sandbox_init.py")
_INIT_PERL = _INIT.with_suffix(".pl")
Supervisor = Literal["auto", "perl", "python"]


class SandboxSettings(BaseSettings):
    """How tools are confined (each field is ``DSH_<FIELD>``; see the module docstring)."""

    model_config = SettingsConfigDict(env_prefix="DSH_", extra="ignore", frozen=True)

    sandbox: SandboxMode = "warn"
    sandbox_network: NetworkMode = "allow"
    tool_env_allow: str = ""
    sandbox_hide: str = ""
    sandbox_memory: ByteSize = ByteSize(ResourceLimits.memory)
    sandbox_file_size: ByteSize = ByteSize(ResourceLimits.file_size)
    sandbox_processes: NonNegativeInt = ResourceLimits.processes
    sandbox_open_files: NonNegativeInt = ResourceLimits.open_files
    sandbox_shm: ByteSize = ByteSize(ResourceLimits.shm)

    @property
    def limits(self) -> ResourceLimits:
        """The resource limits of each sandboxed command (``DSH_SANDBOX_MEMORY``, ``_FILE_SIZE``,
        ``_PROCESSES``, ``_OPEN_FILES``, ``_SHM``; sizes as ``4GiB``, ``512MiB``…; 0 keeps the
        host's limit)."""
        return ResourceLimits(
            memory=int(self.sandbox_memory),
            file_size=int(self.sandbox_file_size),
            processes=self.sandbox_processes,
            open_files=self.sandbox_open_files,
            shm=int(self.sandbox_shm),
        )

    @property
    def hidden_roots(self) -> tuple[str, ...]:
        """The folders ``DSH_SANDBOX_HIDE`` lists (``os.pathsep``-separated, absolute ones
        only): hidden like the host's ``/tmp`` (the checkout a gate runs from: its ``.env``,
        ``.git``)."""
        entries = self.sandbox_hide.split(os.pathsep)
        return tuple(entry for entry in entries if os.path.isabs(entry))

    @property
    def extra_env_names(self) -> tuple[str, ...]:
        """The names listed in ``DSH_TOOL_ENV_ALLOW``."""
        return tuple(name.strip() for name in self.tool_env_allow.split(",") if name.strip())


@functools.cache
def _provider_names() -> tuple[tuple[str, ...], frozenset[str]]:
    """Every installed model provider's ``env_prefix`` and secret variables (``dsh.models``)."""
    from dsh_core import plugins  # noqa: PLC0415 - plugins imports the session layer

    prefixes = tuple(p.upper() for p in plugins.model_env_prefixes())
    return prefixes, frozenset(n.upper() for n in plugins.secret_env_names())


def is_secret_name(name: str) -> bool:
    """Whether a variable may hold a secret: ours, a cloud's or CI's prefix (``DSH_*``,
    ``OPENAI_*``, ``AWS_*``, ``GOOGLE_*``, ``AZURE_*``, ``GCP_*``, ``GH_*``), any installed model
    provider's prefix or secret variable (``dsh_core.plugins.model_env_prefixes``,
    ``secret_env_names``), or a name containing KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL,
    AUTH… (any case)."""
    upper = name.upper()
    if upper.startswith(_NEVER_PREFIXES) or _SECRET_WORDS.search(name):
        return True
    prefixes, secrets = _provider_names()
    return upper.startswith(prefixes) or upper in secrets


def tool_environment(
    home: str,
    tmp: str,
    extra_names: Iterable[str] = (),
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a tool's child process runs with.

    Args:
        home: the run's private home (``HOME``).
        tmp: the run's private temp dir (``TMPDIR``, ``TMP``, ``TEMP``).
        extra_names: further names to pass from ``source`` (secret-shaped ones never pass).
        source: where values come from (default: this process's environment).

    Returns:
        ``PATH``, ``LANG``, ``LANGUAGE``, ``LC_*``, ``TERM``, ``TZ`` and ``extra_names`` as
        ``source`` has them, plus the private ``HOME`` and temp variables; nothing else.
    """
    source = os.environ if source is None else source
    wanted = set(extra_names)
    env = {
        name: value
        for name, value in source.items()
        if (name in _PASSED_NAMES or name.startswith(_PASSED_PREFIXES) or name in wanted)
        and not is_secret_name(name)
    }
    env.setdefault("PATH", os.defpath)
    env |= {"HOME": home, "TMPDIR": tmp, "TMP": tmp, "TEMP": tmp}
    return env


@dataclass(frozen=True)
class SandboxMechanisms:
    """What this system offers.

    Attributes:
        bwrap_problem: why bubblewrap cannot confine a command here, ``None`` when it can.
        seccomp_problem: why the seccomp filter cannot be built, ``None`` when it can.
    """

    bwrap_problem: str | None = None
    seccomp_problem: str | None = None

    @classmethod
    def probe(cls) -> SandboxMechanisms:
        """Probe this system (once per process: the answer is cached)."""
        return _probe()

    @property
    def missing(self) -> list[str]:
        """Each missing mechanism, with why and how to get it."""
        return [p for p in (self.bwrap_problem, self.seccomp_problem) if p is not None]


class SandboxUnavailableError(Exception):
    """``DSH_SANDBOX=strict`` and a mechanism the policy needs is missing."""


@dataclass
class ConfinedCommand:
    """A command ready to start.

    Attributes:
        argv: bubblewrap's command line (or the bare command when unconfined).
        env: the environment to start it with: bubblewrap's own fixed one when confined (the
            command's reaches it through ``--setenv``), the command's when unconfined.
        pass_fds: the descriptors it must inherit; :meth:`started` closes the parent's copies.
        supervised: whether a supervisor inside the sandbox reports the command's own wait
            status and relays signals (:meth:`signal`, :meth:`wait_status`).
    """

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    supervised: bool = False
    _child_fds: list[int] = field(default_factory=list[int])
    _control: int | None = None
    _status: int | None = None
    _forward: LoopbackForward | None = None

    def started(self) -> None:
        """The process has started (or failed to): close the parent's copies of its fds."""
        if self._forward is not None:
            self._forward.started()
        while self._child_fds:
            with contextlib.suppress(OSError):
                os.close(self._child_fds.pop())

    def signal(self, number: int) -> bool:
        """Ask the supervisor to send signal ``number`` to the command's process group;
        ``False`` when there is no supervisor or it is gone."""
        if self._control is None:
            return False
        try:
            os.write(self._control, bytes([number]))
        except OSError:
            return False
        return True

    def wait_status(self) -> int | None:
        """The command's raw wait status once the sandbox has ended, ``None`` if unknown (not
        supervised, or the supervisor was killed before it could say)."""
        if self._status is None:
            return None
        try:
            os.set_blocking(self._status, False)
            return int(os.read(self._status, 64))
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        """Close every descriptor this object opened (idempotent)."""
        self.started()
        if self._forward is not None:
            self._forward.close()
            self._forward = None
        for fd in (self._control, self._status):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._control = self._status = None


class ToolSandbox:
    """One run's confinement for tool processes (shared by every session of the run).

    Args:
        settings: the mode and network policy (default: read from ``DSH_*``).
        mechanisms: what the system offers (default: probed once, on first use). Tests pass
            one to force a mechanism to be missing.
        source_env: where allow-listed variables are read from (default: ``os.environ``).
        root: where the private home and temp dir are made (default: the system temp dir).
        supervisor: what supervises a ``supervised`` command inside the sandbox:
            ``perl`` (:file:`_sandbox_init.pl`, ~2 ms to start), ``python``
            (:mod:`dsh_core._sandbox_init`, the interpreter's start-up) or ``auto`` (perl
            where it exists, the default).
    """

    def __init__(
        self,
        settings: SandboxSettings | None = None,
        mechanisms: SandboxMechanisms | None = None,
        source_env: Mapping[str, str] | None = None,
        root: Path | None = None,
        supervisor: Supervisor = "auto",
    ) -> None:
        self.settings = settings if settings is not None else SandboxSettings()
        self._supervisor = supervisor
        self._mechanisms = mechanisms
        self._source_env = source_env
        self._root = root
        self._base: Path | None = None
        self._warned = False

    def _private_dirs(self) -> tuple[Path, Path]:
        if self._base is None:
            base = Path(tempfile.mkdtemp(prefix="dsh-tool-", dir=self._root)).resolve()
            (base / "home").mkdir(mode=0o700)
            (base / "tmp").mkdir(mode=0o700)
            # Removed when the sandbox is collected or the process exits.
            weakref.finalize(self, shutil.rmtree, base, True)
            self._base = base
        return self._base / "home", self._base / "tmp"

    @property
    def home(self) -> Path:
        """The run's private home directory (created on first use)."""
        return self._private_dirs()[0]

    @property
    def tmp(self) -> Path:
        """The run's private temp directory (created on first use)."""
        return self._private_dirs()[1]

    def environment(self) -> dict[str, str]:
        """The allow-listed environment for a child process (see :func:`tool_environment`)."""
        home, tmp = self._private_dirs()
        return tool_environment(
            str(home), str(tmp), self.settings.extra_env_names, self._source_env
        )

    def confine(
        self,
        argv: Sequence[str],
        cwd: str,
        *,
        env: Mapping[str, str] | None = None,
        chdir: str | None = None,
        readable: Sequence[str] = (),
        network: bool | None = None,
        supervised: bool = False,
        forward_port: int | None = None,
    ) -> ConfinedCommand:
        """``argv`` inside the sandbox the settings and the system allow.

        Args:
            argv: the command.
            cwd: the run's working directory: writable inside, with the private home and tmp.
            env: the command's whole environment (default: :meth:`environment`); it must
                already be allow-listed, it is passed as given.
            chdir: where the command starts (default ``cwd``; e.g. a ``workdir`` below it).
            readable: further paths made visible read-only (hidden ones included, e.g. a
                scenario folder under ``/tmp``).
            network: whether the command shares the host's network (default: the settings').
            supervised: run it under :mod:`dsh_core._sandbox_init`, which relays signals to its
                process group and reports its own wait status (the ``bash`` tool's needs).
            forward_port: the one host service the command may reach: it gets a network of
                its own in which ``127.0.0.1:forward_port`` is relayed to the host's (a foreign
                agent's proxy; :class:`dsh_core._sandbox_net.LoopbackForward`). Implies no
                other network.

        Raises:
            SandboxUnavailableError: strict mode and a mechanism is missing (the message says
                which, why and how to enable it, in one line).
        """
        env = dict(self.environment() if env is None else env)
        if self.settings.sandbox == "off":
            return ConfinedCommand(list(argv), env)
        mechanisms = self._mechanisms if self._mechanisms is not None else _probe()
        self._mechanisms = mechanisms
        if mechanisms.bwrap_problem is not None:
            self._missing(mechanisms.missing)
            return ConfinedCommand(list(argv), env)
        home, tmp = self._private_dirs()
        if network is None:
            network = self.settings.sandbox_network == "allow"
        command = ConfinedCommand([], env)
        seccomp_args: list[str] = []
        if mechanisms.seccomp_problem is None:
            read_end, write_end = os.pipe()
            command._child_fds.append(read_end)  # pyright: ignore[reportPrivateUsage]
            with os.fdopen(write_end, "wb") as sink:
                sink.write(seccomp_program())  # a few hundred bytes: never fills the pipe
            seccomp_args = ["--seccomp", str(read_end)]
        else:
            self._missing(mechanisms.missing)
        inner = list(argv)
        if forward_port is not None:
            network = False
            forward = LoopbackForward(forward_port)
            command._forward = forward  # pyright: ignore[reportPrivateUsage]
            command._child_fds.append(forward.child_fd)  # pyright: ignore[reportPrivateUsage]
            inner = [*forward.prefix(), *inner]
        limits = self.settings.limits
        if supervised:
            status_read, status_write = os.pipe()
            control_read, control_write = os.pipe()
            command._child_fds += [status_write, control_read]  # pyright: ignore[reportPrivateUsage]
            command._status, command._control = status_read, control_write  # pyright: ignore[reportPrivateUsage]
            command.supervised = True
            init, added = self._supervisor_argv(status_write, control_read, env, limits)
        else:
            # No supervisor: the same script only sets the limits, then becomes the command.
            init, added = self._supervisor_argv(None, None, env, limits)
        inner = [*init, "--", *inner]
        env = env | added  # bubblewrap's --setenv only: the supervisor removes it
        command.pass_fds = tuple(command._child_fds)  # pyright: ignore[reportPrivateUsage]
        if command._forward is not None:  # pyright: ignore[reportPrivateUsage]
            # The relay's end is closed by the relay itself, not with the others.
            command._child_fds.remove(command._forward.child_fd)  # pyright: ignore[reportPrivateUsage]
        # bubblewrap resolves a relative path against its own new root, not our cwd: "."
        # would bind over the hidden /tmp itself (and the read-only remount then fails).
        cwd = os.path.abspath(cwd)
        chdir = os.path.join(cwd, chdir) if chdir else cwd
        # Bubblewrap itself starts with a fixed environment: the command's (and anything a
        # scenario put in it, such as LD_LIBRARY_PATH) reaches the command only through
        # --clearenv/--setenv, never the loader or libraries of the launcher on the host.
        command.env = dict(_LAUNCHER_ENV)
        command.argv = [
            *bwrap_options(
                bwrap=_bwrap() or "bwrap",
                cwd=cwd,
                writable=(str(home), str(tmp)),
                readable=[*readable, *_interpreter_paths()],
                chdir=chdir,
                env=env,
                network=network,
                hide=self.settings.hidden_roots,
                shm_bytes=limits.shm or None,
            ),
            *seccomp_args,
            "--",
            *inner,
        ]
        return command

    def _supervisor_argv(
        self,
        status_fd: int | None,
        control_fd: int | None,
        env: Mapping[str, str],
        limits: ResourceLimits,
    ) -> tuple[list[str], dict[str, str]]:
        """The supervisor's command line up to ``--``, and what it adds to the environment
        (for itself only: it removes it before it starts the command). Without descriptors
        (``None``) it only sets ``limits`` and execs the command."""
        fds = ["-" if fd is None else str(fd) for fd in (status_fd, control_fd)]
        spec = limits.spec()
        syscall = prlimit_syscall()
        perl = _perl() if self._supervisor != "python" else None
        if perl is None or syscall is None:
            if self._supervisor == "perl":
                why = "perl is not on PATH" if perl is None else "prlimit64 is not known here"
                raise SandboxUnavailableError(f"the perl supervisor was asked for: {why}")
            return [sys.executable, "-I", "-S", str(_INIT), *fds, spec], {}
        # Quiet about a locale the system lacks (else every command's stderr would say so).
        quiet = {} if "PERL_BADLANG" in env else {"PERL_BADLANG": "0"}
        unset = "PERL_BADLANG" if quiet else ""
        return [perl, str(_INIT_PERL), *fds, unset, f"{syscall}:{spec}"], quiet

    def _missing(self, missing: list[str]) -> None:
        what = "; ".join(missing)
        if self.settings.sandbox == "strict":
            raise SandboxUnavailableError(f"sandbox unavailable and DSH_SANDBOX=strict: {what}")
        if not self._warned:
            self._warned = True
            print(f"dsh: sandbox incomplete, running without {what}", file=sys.stderr)


def host_which(name: str, path: str | None = None) -> str | None:
    """Where the program ``name`` is, looked up in the absolute entries of ``PATH`` only.

    A relative entry (``./node_modules/.bin``, an empty one meaning ``.``) would be resolved
    against whatever the current directory is when a process starts, and the gate starts
    programs in a run's cwd, which holds the scenario's ``workspace/``: a program found there
    would be the pull request's, running on the host. Returns the resolved absolute path.
    """
    entries = (os.environ.get("PATH", os.defpath) if path is None else path).split(os.pathsep)
    absolute = os.pathsep.join(entry for entry in entries if os.path.isabs(entry))
    found = shutil.which(name, path=absolute)
    return os.path.realpath(found) if found else None


@functools.cache
def _perl() -> str | None:
    """Where perl is (resolved, so the path is the same inside), ``None`` when it is not."""
    return host_which("perl")


@functools.cache
def _bwrap() -> str | None:
    """Where bubblewrap is (absolute, looked up once; see :func:`host_which`)."""
    return host_which("bwrap")


def _interpreter_paths() -> list[str]:
    """What the supervisors need to be read from inside (bound only when a hidden folder
    covers them, e.g. a virtual environment under /tmp): this interpreter's prefixes, perl's
    folder and this package."""
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    perl = _perl()
    if perl is not None:
        paths.add(os.path.dirname(perl))
    paths.add(str(_INIT.parent))
    return sorted(paths)


@functools.cache
def _probe() -> SandboxMechanisms:
    """Start the policy once around ``true``: bubblewrap missing, or the kernel refusing its
    namespaces (AppArmor on Ubuntu 24.04, a container without user namespaces), shows here."""
    seccomp_problem: str | None = None
    try:
        seccomp_program()
    except SeccompUnavailableError as exc:
        seccomp_problem = f"the seccomp filter ({exc})"
    if not sys.platform.startswith("linux"):
        return SandboxMechanisms(f"bubblewrap (Linux only, not {sys.platform})", seccomp_problem)
    if _bwrap() is None:
        return SandboxMechanisms(f"bubblewrap: bwrap is not on PATH; {INSTALL_BWRAP_HINT}")
    with tempfile.TemporaryDirectory(prefix="dsh-probe-") as scratch:
        options = bwrap_options(
            bwrap=_bwrap() or "bwrap",
            cwd=scratch,
            writable=(),
            readable=(),
            chdir=scratch,
            env={},
            network=False,
        )
        try:
            done = subprocess.run(
                [*options, "--", "true"],
                env=_LAUNCHER_ENV,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return SandboxMechanisms(f"bubblewrap (bwrap did not run: {exc})", seccomp_problem)
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return SandboxMechanisms(
            f"bubblewrap (bwrap cannot create its namespaces: {detail}); {ENABLE_USERNS_HINT}",
            seccomp_problem,
        )
    return SandboxMechanisms(None, seccomp_problem)

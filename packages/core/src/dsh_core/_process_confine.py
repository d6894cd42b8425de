"""The sandbox policy applied from inside a running process: our own agent.

Bubblewrap confines a command it starts. The warm agent (``dsh_acp_agent``'s fork server) is
not started: it is forked from a pre-imported parent, and wrapping each fork in bubblewrap
would cost the interpreter start the fork server exists to save. So the child confines itself,
right after the fork and before it runs any agent code, with the parts of the same policy that
apply to a process already running (SECURITY.md, "The sandbox"). The cold agent (``--cold``,
a scenario's ``clock:``) gets the very same plan from a launcher that applies it and then
``exec``s the agent (:func:`confined_command`).

- a new session (no controlling terminal; the fork server's child and the launcher do it,
  with the death signal);
- new user, IPC and UTS namespaces, and (``network`` off: replay and refresh, whose model is a
  file) a new network namespace with not even a loopback up; the ids map to themselves;
- a mount namespace in which the host file system is read-only (writes, ``chmod``,
  ``utime``, xattrs fail with ``EROFS``) and hidden where it holds what the agent must not
  read: every home (``/home``, ``/root``, ``$HOME``, the account's: as for commands,
  :func:`dsh_core._sandbox_fs.home_folders`), the host's ``/tmp``, ``/var/tmp``, ``/run``,
  ``$XDG_RUNTIME_DIR`` (kept, read-only, when a server store is reached over a socket) and
  the ``hide`` folders (the checkout the gate runs in); writable: the run's folders only
  (``writable``, the cwd, ``TMPDIR``, ``DSH_SESSIONS_ROOT``); readable again below a hidden
  folder: the interpreter, the installed and editable packages, what the programs on
  ``PATH`` need from the homes (lent as to commands, credential names hidden again),
  ``readable`` (the scenario folder), the caller's ``PYTHONPYCACHEPREFIX`` and
  ``/etc/resolv.conf``'s target when the network is kept;
- non-root: every capability dropped; root: a second user namespace (its capabilities,
  which a nested bubblewrap needs, reach nothing of the mounts);
- ``no_new_privs``, Landlock scoping of signals and abstract sockets (kernel ABI 6+), and the
  seccomp filter of :mod:`dsh_core._seccomp` in its agent variant (socket families by
  allow-list, ``AF_UNIX`` only when a server store must be reached over one; no kernel
  keyring, ``ptrace``, ``bpf``, io_uring, ``TIOCSTI``…; mounts and namespaces stay, for the
  bubblewrap its commands run in), loaded with ``prctl`` from the BPF program libseccomp
  compiled once in the parent.

The system calls are in :mod:`dsh_core._self_confine` (standard library only: it is also the
cold launcher). Inherited by everything the agent starts: its ``bash`` commands then enter
bubblewrap from inside these namespaces (a nested user namespace is allowed).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from dsh_core import _self_confine
from dsh_core._sandbox import ENABLE_USERNS_HINT, SandboxUnavailableError, host_which
from dsh_core._sandbox_fs import HIDDEN_DIRS, _credentials_in, home_folders, lent_from_homes
from dsh_core._seccomp import SeccompUnavailableError, seccomp_program

__all__ = [
    "ProcessConfinement",
    "confine_process",
    "confined_command",
    "confinement_plan",
    "prepare_process_confinement",
]

ConfinementMode = Literal["strict", "warn", "off"]

_LAUNCHER = Path(_self_confine.__file__)


def _paths(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(
        isinstance(item, str) for item in cast(Sequence[object], value)
    ):
        raise ValueError(f"confinement {name} must be a list of paths")
    return tuple(cast(Sequence[str], value))


@dataclass(frozen=True)
class ProcessConfinement:
    """What a process applies to itself (see the module docstring).

    Attributes:
        network: keep the host's network (a live or scripted model client needs it); ``False``
            gives a network namespace of its own with nothing up.
        unix_sockets: allow ``socket(AF_UNIX)`` (a server store reached over a Unix socket;
            the host's ``/tmp`` and ``/run``, where such sockets live, then stay visible,
            read-only).
        mode: ``strict`` (a missing mechanism is an error), ``warn`` (apply what exists, say
            once on stderr what is missing) or ``off`` (nothing; the caller's session and death
            signal still apply). As ``DSH_SANDBOX`` for commands.
        writable: folders the process may write besides its cwd, ``TMPDIR`` and
            ``DSH_SESSIONS_ROOT`` (the run's temporary folder).
        readable: paths readable even below a hidden folder (the scenario folder).
        hide: further folders to hide (the checkout the gate runs in: its ``.env``, ``.git``).
    """

    network: bool = True
    unix_sockets: bool = False
    mode: ConfinementMode = "warn"
    writable: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON object :meth:`from_json` reads back."""
        return {
            "network": self.network,
            "unix_sockets": self.unix_sockets,
            "mode": self.mode,
            "writable": list(self.writable),
            "readable": list(self.readable),
            "hide": list(self.hide),
        }

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
            writable=_paths(fields.get("writable", []), "writable"),
            readable=_paths(fields.get("readable", []), "readable"),
            hide=_paths(fields.get("hide", []), "hide"),
        )


def prepare_process_confinement() -> None:
    """Do once, in a parent that forks many confined children, what costs time: load libc,
    let libseccomp compile both filters (a missing libseccomp is reported by the child), list
    the interpreter's paths and what ``PATH`` needs from the homes, and ask the kernel for its
    Landlock ABI."""
    if not sys.platform.startswith("linux"):
        return
    _self_confine.landlock_abi()
    _interpreter_paths()
    lent_from_homes(os.environ.get("PATH", ""), _homes(os.environ.get("HOME", "")))
    for unix_sockets in (False, True):
        _seccomp_base64(unix_sockets)


@functools.cache
def _seccomp_base64(unix_sockets: bool) -> tuple[str | None, str | None]:
    try:
        program = seccomp_program(unix_sockets=unix_sockets, agent=True)
    except SeccompUnavailableError as exc:
        return None, f"the seccomp filter ({exc})"
    return base64.b64encode(program).decode("ascii"), None


@functools.cache
def _interpreter_paths() -> tuple[str, ...]:
    """What the agent reads after it has started (lazy imports, its supervisors): this
    interpreter's prefixes, every folder on ``sys.path`` (editable sources too) and where perl
    and bubblewrap are, resolved."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found.add(os.path.dirname(os.path.realpath(sys.executable)))
    found.update(entry for entry in sys.path if os.path.isabs(entry))
    for program in ("perl", "bwrap"):
        where = host_which(program)
        if where is not None:
            found.add(os.path.dirname(where))
    return tuple(sorted({os.path.realpath(p) for p in found if os.path.exists(p)}))


@functools.cache
def _homes(home: str) -> tuple[str, ...]:
    """Every home, as commands have them hidden (``/home``, ``/root``, the agent's ``$HOME``,
    this process's and the account's), none inside another."""
    found = sorted({*home_folders(home), *home_folders()}, key=len)
    return tuple(h for i, h in enumerate(found) if not any(_under(h, o) for o in found[:i]))


def _absolute(paths: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(os.path.realpath(p) for p in paths if p and os.path.isabs(p)))


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@functools.cache
def _views(
    home: str, path: str, hide: tuple[str, ...], scratch: tuple[str, ...], network: bool
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What is hidden and what comes back read-only below it, whatever the run: computed
    once per process (a fork server's children share it) for these inputs."""
    homes = _homes(home)
    hidden = _absolute([*homes, *hide, *scratch])
    # What must stay readable, unless it would bring back a whole hidden folder (a gate
    # started with `python -m` from the checkout has the checkout itself on sys.path): the
    # interpreter and what the programs on PATH need from the homes, as commands have it
    # lent (their bubblewrap starts inside this view), credential names hidden again.
    others = [h for h in hidden if h not in homes]
    lent = [
        p
        for p in lent_from_homes(path, homes)
        if not any(_under(p, o) or _under(o, p) for o in others)
    ]
    automatic = [p for p in [*_interpreter_paths(), *lent] if not any(_under(h, p) for h in hidden)]
    hidden += [found for found, _ in _credentials_in(automatic, homes)]
    if network:
        automatic.append(os.path.realpath("/etc/resolv.conf"))  # often under /run
    return tuple(hidden), tuple(automatic)


def _pycache(env: Mapping[str, str]) -> list[str]:
    """A bytecode cache the caller set (``PYTHONPYCACHEPREFIX``, often under a hidden folder):
    readable, so a cold agent does not compile every module again; never writable (a
    ``.pyc`` planted there would run in the next unconfined interpreter)."""
    prefix = env.get("PYTHONPYCACHEPREFIX", "")
    return [prefix] if os.path.isabs(prefix) and os.path.isdir(prefix) else []


# Files the agent's own settings name, from the caller's environment (never a scenario's):
# readable wherever they are, as the user's ``DSH_SYSTEM_PROMPT_FILE`` in a hidden /tmp.
_SETTINGS_FILES = ("DSH_SYSTEM_PROMPT_FILE",)


def _settings_files(env: Mapping[str, str]) -> list[str]:
    named = (env.get(name, "") for name in _SETTINGS_FILES)
    return [path for path in named if os.path.isabs(path) and os.path.isfile(path)]


def confinement_plan(
    confinement: ProcessConfinement, cwd: str, env: Mapping[str, str]
) -> dict[str, Any]:
    """The plan :func:`dsh_core._self_confine.apply` carries out for ``confinement``, for an
    agent that runs in ``cwd`` with ``env``: every path resolved, the filter compiled."""
    scratch: tuple[str, ...] = ()
    if not confinement.unix_sockets:
        runtime = env.get("XDG_RUNTIME_DIR") or os.environ.get("XDG_RUNTIME_DIR", "")
        scratch = (*HIDDEN_DIRS, runtime)
    hide, automatic = _views(
        env.get("HOME", ""), env.get("PATH", ""), confinement.hide, scratch, confinement.network
    )
    writable = [
        *confinement.writable,
        cwd,
        env.get("TMPDIR", ""),
        env.get("DSH_SESSIONS_ROOT", ""),
    ]
    program, problem = _seccomp_base64(confinement.unix_sockets)
    return {
        "mode": confinement.mode,
        "network": confinement.network,
        "writable": _absolute(writable),
        "readable": [
            *_absolute([*confinement.readable, *_pycache(env), *_settings_files(env)]),
            *automatic,
        ],
        "hide": list(hide),
        "seccomp": program,
        "seccomp_problem": problem,
        "userns_hint": ENABLE_USERNS_HINT,
    }


def confine_process(
    confinement: ProcessConfinement,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Apply ``confinement`` to this process, for good (it cannot be undone).

    Call it in a single-threaded process (a user namespace refuses a threaded one), after
    ``setsid``, then ``chdir`` into ``cwd`` again (the mounts have changed under it).

    Args:
        confinement: what to apply.
        cwd: where the agent will run (writable); default: this process's cwd.
        env: the agent's environment (its ``TMPDIR``, ``DSH_SESSIONS_ROOT`` and ``HOME``);
            default: this process's.

    Returns:
        What could not be applied, each with why (empty: everything was), so a ``warn`` caller
        can say it.

    Raises:
        dsh_core.SandboxUnavailableError: ``strict`` and something is missing, or the file
            system was confined half way (in any mode: the process must not run on); one
            line: what, why and how to enable it.
    """
    if confinement.mode == "off":
        return []
    plan = confinement_plan(
        confinement, os.getcwd() if cwd is None else cwd, os.environ if env is None else env
    )
    try:
        missing = _self_confine.apply(plan)
    except SystemError as exc:
        raise SandboxUnavailableError(f"agent confinement failed: {exc}") from None
    if missing and confinement.mode == "strict":
        raise SandboxUnavailableError(
            f"agent confinement unavailable and DSH_SANDBOX=strict: {'; '.join(missing)}"
        )
    return missing


def confined_command(
    confinement: ProcessConfinement, argv: Sequence[str], cwd: str, env: Mapping[str, str]
) -> list[str]:
    """``argv`` started through the launcher that applies ``confinement`` first (the cold
    agent's path: the same plan as a forked child's), in a session of its own and killed
    with its parent; ``argv`` itself when the mode is ``off``. In ``strict`` mode, a launcher
    that cannot confine exits 71 saying why in one line, and ``argv`` never runs."""
    if confinement.mode == "off":
        return list(argv)
    plan = confinement_plan(confinement, cwd, env)
    # -I -S: no site, no environment variable of the agent's reaches the launcher's Python.
    return [sys.executable, "-I", "-S", str(_LAUNCHER), json.dumps(plan), "--", *argv]

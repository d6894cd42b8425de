"""What a sandboxed command sees of the host's file system: bubblewrap's mount options.

The host is bound read-only, then whole folders are hidden behind empty read-only tmpfs: the
host's scratch and runtime folders (``/tmp``, ``/var/tmp``, ``/run``), the folders the caller
names (the checkout a gate runs from) and **every home**: ``/root``, ``/home`` (other users'
homes) and the caller's own ``$HOME`` wherever it lives. A home holds what no command of a run
may read (shell start-up files that export keys, credential folders, histories, the keyrings of
a desktop), and a list of credential names is never complete; so nothing of a home is visible
unless it is *lent* back, read-only, because a command or agent needs it to run:

- what the caller passes (``readable``: the interpreter's prefixes, a foreign agent's scenario);
- :func:`lent_from_homes`: each absolute ``PATH`` entry that lies in a home, its tool root
  (``~/.pyenv`` for ``~/.pyenv/shims``, never the home itself nor its XDG base folders such as
  ``~/.local``), and the install root of each program there that is a link or a script whose
  interpreter lives in a home (a virtual environment and its base interpreter, a ``node_modules``
  tree), derived from the files themselves, not from a list of this machine.

Inside what is lent, the usual credential names (``.cargo/credentials.toml``, ``.ssh``…) are
hidden again. ``/dev`` is bubblewrap's own, read-only, with a size-capped ``/dev/shm``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
from collections.abc import Mapping, Sequence

__all__ = ["bwrap_options", "home_folders", "lent_from_homes"]

# Where a host keeps its sockets and shared scratch space: hidden behind an empty tmpfs.
HIDDEN_DIRS = ("/tmp", "/var/tmp", "/run", "/var/run")
# Where homes live, besides the caller's own $HOME: other users' and root's.
HOME_PARENTS = ("/home", "/root")
# A "home" that is one of these is the system itself (a service account's HOME=/ or /var):
# it is never hidden whole (the run would have no programs left).
_SYSTEM_DIRS = frozenset(
    ["/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/opt", "/proc", "/sbin",
     "/srv", "/sys", "/usr", "/usr/local", "/var", "/var/lib", "/mnt", "/media"]
)  # fmt: skip
# Credential folders and files of a home: hidden again inside what a home lends (a tool root
# such as ~/.cargo holds its registry token).
HIDDEN_IN_HOME = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".docker",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".cargo/credentials",
    ".cargo/credentials.toml",
)
# XDG base folders (the specification's defaults): containers of every application's data,
# never lent whole as a PATH entry's tool root (~/.local/bin lends itself, not ~/.local).
_XDG_BASES = (".local", ".local/share", ".local/state", ".config", ".cache")
# A PATH entry of one of these names is the bin folder of a tool root (its parent).
_BIN_NAMES = frozenset({"bin", "sbin", "shims"})
_SHEBANG_BYTES = 256
_MAX_ENTRIES = 512  # of one PATH folder: a folder fuller than this is lent, not walked


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _under_any(path: str, roots: Sequence[str]) -> bool:
    return any(_within(path, root) for root in roots)


def home_folders(env_home: str | None = None) -> tuple[str, ...]:
    """Every home to hide, resolved and existing: ``/home``, ``/root``, the caller's ``$HOME``
    (``env_home``, default this process's) and its home in the password database (they differ
    under a test's fake ``HOME``). A system folder (``/``, ``/var``…) is never one."""
    candidates = [*HOME_PARENTS, env_home if env_home is not None else os.environ.get("HOME", "")]
    with contextlib.suppress(KeyError):
        candidates.append(pwd.getpwuid(os.getuid()).pw_dir)
    found: list[str] = []
    for candidate in candidates:
        if not candidate or not os.path.isabs(candidate):
            continue
        real = os.path.realpath(candidate)
        if real in _SYSTEM_DIRS or not os.path.isdir(real) or _under_any(real, found):
            continue
        found = [f for f in found if not _within(f, real)] + [real]
    return tuple(sorted(found))


def _containing_home(path: str, homes: Sequence[str]) -> str | None:
    """The home ``path`` lies in; for ``/home`` the user's own folder (``/home/u``)."""
    for home in homes:
        if _within(path, home):
            if home == "/home":
                parts = path[len(home) :].strip("/").split("/")
                return os.path.join(home, parts[0]) if parts[0] else home
            return home
    return None


def _lendable(folder: str, homes: Sequence[str]) -> bool:
    """Whether a folder may be lent whole: inside a home, but not the home itself, one of its
    XDG base folders, nor a folder above a home."""
    home = _containing_home(folder, homes)
    if home is None or folder == home:
        return False
    bases = {os.path.join(home, base) for base in _XDG_BASES}
    return folder not in bases


def _install_root(real: str, homes: Sequence[str]) -> str | None:
    """The folder a program (resolved) was installed as a whole, when it lies in a home: the
    nearest folder holding ``pyvenv.cfg`` (a virtual environment), else the parent of the
    outermost ``node_modules``, else the parent of the nearest ``bin``, else its own folder."""
    home = _containing_home(real, homes)
    if home is None:
        return None
    folder = os.path.dirname(real)
    chain: list[str] = []
    while _within(folder, home) and folder != home:
        chain.append(folder)
        folder = os.path.dirname(folder)
    for candidate in chain:
        if os.path.isfile(os.path.join(candidate, "pyvenv.cfg")):
            return candidate
    modules = [c for c in chain if os.path.basename(c) == "node_modules"]
    if modules:
        return os.path.dirname(modules[-1])
    for candidate in chain:
        parent = os.path.dirname(candidate)
        if os.path.basename(candidate) in _BIN_NAMES and _lendable(parent, homes):
            return parent
    return chain[0] if chain else None


def _venv_base(root: str) -> str | None:
    """A virtual environment's base interpreter folder (``pyvenv.cfg``'s ``home``)."""
    try:
        with open(os.path.join(root, "pyvenv.cfg"), encoding="utf-8", errors="replace") as cfg:
            for line in cfg.read(8192).splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home" and os.path.isabs(value.strip()):
                    return os.path.realpath(value.strip())
    except OSError:
        return None
    return None


def _interpreter(path: str) -> str | None:
    """The absolute interpreter of a script's ``#!`` line (``env NAME`` is left to ``PATH``)."""
    try:
        with open(path, "rb") as script:
            head = script.read(_SHEBANG_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    if not words or not words[0].startswith(b"/"):
        return None
    return os.fsdecode(words[0])


def _roots_of(program: str, homes: Sequence[str], lent: set[str], depth: int = 0) -> None:
    """Add what ``program`` (a path) needs from the homes to ``lent``: its install root, a
    virtual environment's base interpreter, a script's interpreter (links followed)."""
    if depth > 4:
        return
    real = os.path.realpath(program)
    root = _install_root(real, homes)
    if root is not None and root not in lent:
        lent.add(root)
        base = _venv_base(root)
        if base is not None:
            _roots_of(os.path.join(base, "python"), homes, lent, depth + 1)
    interpreter = _interpreter(real) if os.path.isfile(real) else None
    if interpreter is not None and interpreter != real:
        _roots_of(interpreter, homes, lent, depth + 1)


@functools.cache
def lent_from_homes(path_value: str, homes: tuple[str, ...]) -> tuple[str, ...]:
    """What the programs on ``PATH`` (``path_value``) need from the hidden ``homes``, lent
    read-only (see the module docstring). Cached per process: derived once per ``PATH``."""
    lent: set[str] = set()
    for entry in path_value.split(os.pathsep):
        if not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if not _lendable(real, homes):
            continue  # outside the homes (visible anyway), or a home or XDG base folder itself
        lent.add(real)
        parent = os.path.dirname(real)
        if os.path.basename(real) in _BIN_NAMES and _lendable(parent, homes):
            lent.add(parent)
        try:
            names = sorted(os.listdir(real))[:_MAX_ENTRIES]
        except OSError:
            continue
        for name in names:
            _roots_of(os.path.join(real, name), homes, lent)
    # A folder inside another lent one is lent with it.
    ordered = sorted(lent, key=len)
    kept: list[str] = []
    for path in ordered:
        if not _under_any(path, kept):
            kept.append(path)
    return tuple(sorted(kept))


def _hidden_paths(
    homes: Sequence[str], hide: Sequence[str] = (), runtime: str | None = None
) -> list[tuple[str, bool]]:
    """Host paths to hide: ``(path, is_dir)`` for those that exist (links are left: hiding
    their target is enough, and ``/var/run`` is one to ``/run`` on most systems)."""
    candidates: list[str] = [*HIDDEN_DIRS, *homes, *(os.path.realpath(h) for h in hide)]
    if runtime and os.path.isabs(runtime):
        candidates.append(runtime)
    found: list[tuple[str, bool]] = []
    for path in candidates:
        if os.path.islink(path) or not os.path.exists(path):
            continue
        found.append((path, os.path.isdir(path)))
    # Parents before what lies below them: a folder inside one hidden is mounted on top.
    return sorted(set(found), key=lambda entry: entry[0].rstrip("/").count("/"))


def _credentials_in(lent: Sequence[str], homes: Sequence[str]) -> list[tuple[str, bool]]:
    """The credential names (:data:`HIDDEN_IN_HOME`) of each user's home that a lent folder
    would show again."""
    found: list[tuple[str, bool]] = []
    users = {h for path in lent if (h := _containing_home(path, homes)) is not None}
    for home in sorted(users):
        for name in HIDDEN_IN_HOME:
            path = os.path.join(home, name)
            shown = _under_any(path, lent) or any(_within(root, path) for root in lent)
            if shown and not os.path.islink(path) and os.path.exists(path):
                found.append((path, os.path.isdir(path)))
    return found


def _hide(entries: Sequence[tuple[str, bool]]) -> list[str]:
    options: list[str] = []
    for path, is_dir in entries:
        options += ["--tmpfs", path] if is_dir else ["--ro-bind", "/dev/null", path]
    return options


def bwrap_options(
    *,
    bwrap: str,
    cwd: str,
    writable: Sequence[str],
    readable: Sequence[str],
    chdir: str,
    env: Mapping[str, str],
    network: bool,
    hide: Sequence[str] = (),
    shm_bytes: int | None = None,
    home: str | None = None,
) -> list[str]:
    """bubblewrap's command line up to (not including) ``--seccomp`` and ``--``.

    Args:
        bwrap: bubblewrap's absolute path.
        cwd: the run's working directory (writable).
        writable: the private home and temp dir (writable).
        readable: paths lent read-only when a hidden folder covers them.
        chdir: where the command starts.
        env: the command's whole environment (``--setenv``); its ``PATH`` decides what the
            homes lend (:func:`lent_from_homes`).
        network: share the host's network (else a namespace with its own loopback only).
        hide: further folders to hide (what ``readable`` lists below them stays visible).
        shm_bytes: the size of ``/dev/shm`` (``None``: bubblewrap's default, half the RAM).
        home: the caller's home (default: this process's ``$HOME``).
    """
    options = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-user",
        "--disable-userns",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
    ]
    if shm_bytes is not None:
        options += ["--size", str(shm_bytes), "--tmpfs", "/dev/shm"]
    # bubblewrap's /dev is a writable tmpfs of half the RAM: nothing but /dev/shm may grow.
    options += ["--remount-ro", "/dev", "--proc", "/proc"]
    if not network:
        options.append("--unshare-net")
    homes = home_folders(home)
    hidden = _hidden_paths(homes, hide, os.environ.get("XDG_RUNTIME_DIR"))
    options += _hide(hidden)
    hidden_dirs = [path for path, _ in hidden]
    # What PATH lends never reaches into (nor covers) another hidden folder: a checkout in a
    # home stays hidden although a PATH entry lies in it.
    others = [path for path in hidden_dirs if path not in homes]
    from_path = [
        path
        for path in lent_from_homes(env.get("PATH", ""), homes)
        if not _under_any(path, others) and not any(_within(o, path) for o in others)
    ]
    bound: list[str] = []
    for path in sorted(dict.fromkeys([*readable, *from_path]), key=lambda p: p.count("/")):
        # Only what a hidden folder covers needs binding (the rest is visible already, and a
        # link cannot be bound over itself on a read-only file system); what lies in a folder
        # lent already is visible with it.
        if not _under_any(path, hidden_dirs) or _under_any(path, bound):
            continue
        if not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        # A link is lent as what it points to, at its own path and at the target's.
        for target in dict.fromkeys([path, real]):
            if _under_any(target, hidden_dirs):
                options += ["--ro-bind", real, target]
                bound.append(target)
    credentials = _credentials_in(bound, homes)
    options += _hide(credentials)
    for path in (cwd, *writable):
        options += ["--bind", path, path]
    # The empty folders are read-only too (the binds inside them stay as they are): a write
    # to /tmp/x fails as one to /etc/x does, rather than landing in memory.
    for path, is_dir in [*hidden, *credentials]:
        if is_dir:
            options += ["--remount-ro", path]
    options += ["--chdir", chdir, "--clearenv"]
    for name, value in env.items():
        options += ["--setenv", name, value]
    return options

"""What ``record`` takes from ``./.env``: the user's key, never where it goes.

A ``.env`` in the checkout may come from a pull request. A committed one holding only the
provider's ``…_BASE_URL`` would send the maintainer's exported key to the PR author's host in
the very first request, so the rule is:

- a ``.env`` that git tracks is ignored whole (a repository never chooses anything here; a key
  in a tracked file is a leak of its own);
- from an untracked ``.env`` only the variables that hold a key (each installed provider's
  ``secret_env_names``) are read, and only when the environment does not set them already;
  every other variable in it (a base URL, a model, ``DSH_*``…) is ignored — settings that decide
  where the key goes come from the user's shell, visibly;
- a ``.env`` that is a symlink is not followed.

Each ignored file or variable is one line on stderr naming it (never a value).
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from dotenv import dotenv_values

from dsh_core import host_which
from dsh_core.plugins import ModelProvider, secret_env_names

__all__ = ["DOTENV", "git_tracks", "key_destination", "load_keys", "run_git"]

DOTENV = ".env"
_MAX_DOTENV = 64 * 1024


def _work_tree(folder: Path) -> Path | None:
    """The nearest directory at or above ``folder`` holding a ``.git`` entry (not a link).

    Found by us, not by git: git's own discovery also takes a folder holding ``HEAD``,
    ``objects/`` and ``refs/`` for a *bare repository* and reads its ``config`` — ordinary
    files a pull request can commit into a scenario, whose ``core.fsmonitor`` git then runs
    on the host. A ``.git`` entry cannot arrive through git (it refuses that path name).
    """
    for candidate in (folder, *folder.parents):
        try:
            mode = os.lstat(candidate / ".git").st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
            return candidate
    return None


# What git may take from a repository's configuration that runs a program or reads outside
# it; pinned off on the command line, which wins over every configuration file.
_GIT_PINS = (
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "safe.bareRepository=explicit",
    "-c", "core.untrackedCache=false",
)  # fmt: skip


def run_git(folder: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    """``git ARGS`` in the work tree around ``folder``, or ``None`` (no git, no work tree,
    git fails to start or hangs).

    git is found in absolute ``PATH`` entries only and started from ``/``: with a relative
    entry (``./node_modules/.bin``) and the scenario folder as the current directory, a
    ``git`` the pull request committed there would run on the host. The repository is named
    to git (``GIT_DIR``/``GIT_WORK_TREE``), never discovered by it, and no system
    configuration or configuration program is taken.
    """
    git = host_which("git")
    top = _work_tree(folder.absolute())
    if git is None or top is None:
        return None
    env = {
        **os.environ,
        "GIT_DIR": str(top / ".git"),
        "GIT_WORK_TREE": str(top),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_OPTIONAL_LOCKS": "0",  # a read never writes the index
    }
    for name in ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF", "GIT_PAGER"):
        env.pop(name, None)
    try:
        return subprocess.run(
            [git, *_GIT_PINS, "-C", str(folder), *args],
            cwd="/",
            env=env,
            capture_output=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def git_tracks(path: Path) -> bool:
    """Whether the git work tree around ``path`` tracks it (no git, no repository: False)."""
    done = run_git(path.parent, "ls-files", "--error-unmatch", "--", path.name)
    return done is not None and done.returncode == 0


def _read(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        print(f"dsh-snapshot record: {path} ignored: {exc.strerror}", file=sys.stderr)
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            print(f"dsh-snapshot record: {path} ignored: not a regular file", file=sys.stderr)
            return None
        return handle.read(_MAX_DOTENV).decode("utf-8", "replace")


def load_keys(cwd: Path) -> list[str]:
    """Set the key variables an untracked ``cwd/.env`` holds; return what was ignored (names).

    Variables already in the environment win (as ``load_dotenv(override=False)`` did).
    """
    path = cwd / DOTENV
    if not os.path.lexists(path):
        return []
    if git_tracks(path):
        print(
            f"dsh-snapshot record: {path} ignored: git tracks it, and a repository must not "
            "choose the key or where it goes (export them in your shell)",
            file=sys.stderr,
        )
        return [DOTENV]
    text = _read(path)
    if text is None:
        return [DOTENV]
    keys = set(secret_env_names())
    ignored: list[str] = []
    for name, value in dotenv_values(stream=io.StringIO(text)).items():
        if name not in keys:
            ignored.append(name)
        elif value and name not in os.environ:
            os.environ[name] = value
    if ignored:
        print(
            f"dsh-snapshot record: {path}: only API keys are read from it; ignored "
            f"{', '.join(sorted(ignored))} (set them in your shell to use them)",
            file=sys.stderr,
        )
    return ignored


def key_destination(provider: ModelProvider) -> str | None:
    """The host the provider's key is sent to (its settings' ``base_url``), if it says."""
    if provider.settings_model is None:
        return None
    try:
        url = getattr(provider.settings_model(), "base_url", None)
    except ValueError:
        return None
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    return f"{parts.hostname or url}{f':{parts.port}' if parts.port else ''}"

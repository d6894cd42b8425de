"""What a tool's child process gets: an allow-listed environment and, on Linux, a sandbox.

A command the model (or a recorded scenario) runs must not see the agent's secrets nor touch
what lies outside its run. :class:`ToolSandbox` owns one run's private directories (a temp home
and a temp dir, removed when the run ends), builds the child's environment from an allow-list,
and wraps the command in ``_sandbox_exec.py`` so that writes are confined to the session cwd and
those directories (Landlock) and, when asked, no network is reachable (a new network namespace,
plus Landlock's TCP rules as a second layer).

Settings (``DSH_*``, read by :class:`SandboxSettings`):

- ``DSH_SANDBOX``: ``strict`` (a missing mechanism fails the command), ``warn`` (the default:
  run with what exists and say once, on stderr, what is missing) or ``off`` (unconfined;
  the environment is still allow-listed);
- ``DSH_SANDBOX_NETWORK``: ``allow`` (the default) or ``deny``;
- ``DSH_TOOL_ENV_ALLOW``: comma-separated extra variable names to pass; credential-shaped
  names are dropped even when listed here.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "SandboxMechanisms",
    "SandboxSettings",
    "SandboxUnavailableError",
    "ToolSandbox",
    "is_secret_name",
    "tool_environment",
]

SandboxMode = Literal["strict", "warn", "off"]
NetworkMode = Literal["allow", "deny"]

_PASSED_NAMES = frozenset({"PATH", "LANG", "LANGUAGE", "TERM", "TZ"})
_PASSED_PREFIXES = ("LC_",)
_NEVER_PREFIXES = ("DEEPSEEK_", "DSH_", "OPENAI_", "AWS_", "GOOGLE_", "AZURE_", "GCP_", "GH_")
# Names that look like they hold a credential, wherever the word sits in the name.
_SECRET_WORDS = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|PRIVATE|SESSION|JWT",
    re.IGNORECASE,
)
# Devices a shell writes to as a matter of course.
_WRITABLE_DEVICES = tuple(
    device
    for device in ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
    if Path(device).exists()
)
_WRAPPER = Path(__file__).with_name("_sandbox_exec.py")


class SandboxSettings(BaseSettings):
    """How tools are confined (each field is ``DSH_<FIELD>``; see the module docstring)."""

    model_config = SettingsConfigDict(env_prefix="DSH_", extra="ignore", frozen=True)

    sandbox: SandboxMode = "warn"
    sandbox_network: NetworkMode = "allow"
    tool_env_allow: str = ""

    @property
    def extra_env_names(self) -> tuple[str, ...]:
        """The names listed in ``DSH_TOOL_ENV_ALLOW``."""
        return tuple(name.strip() for name in self.tool_env_allow.split(",") if name.strip())


def is_secret_name(name: str) -> bool:
    """Whether a variable may hold a secret: a provider's or CI's prefix (``DEEPSEEK_*``,
    ``DSH_*``, ``OPENAI_*``, ``AWS_*``, ``GOOGLE_*``, ``AZURE_*``, ``GCP_*``, ``GH_*``) or a name
    containing KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH, JWT… (any case)."""
    return name.upper().startswith(_NEVER_PREFIXES) or bool(_SECRET_WORDS.search(name))


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
        landlock_abi: the kernel's Landlock ABI version (0: none).
        netns_problem: why a new network namespace cannot be made, ``None`` when it can.
    """

    landlock_abi: int
    netns_problem: str | None = None

    @classmethod
    def none(cls, reason: str) -> SandboxMechanisms:
        """Nothing available, for ``reason`` (another OS, a failed probe)."""
        return cls(0, reason)


class SandboxUnavailableError(Exception):
    """``DSH_SANDBOX=strict`` and a mechanism the settings ask for is missing."""


class ToolSandbox:
    """One run's confinement for tool processes (shared by every session of the run).

    Args:
        settings: the mode and network policy (default: read from ``DSH_*``).
        mechanisms: what the system offers (default: probed once, on first use). Tests pass
            one to force a mechanism to be missing.
        source_env: where allow-listed variables are read from (default: ``os.environ``).
    """

    def __init__(
        self,
        settings: SandboxSettings | None = None,
        mechanisms: SandboxMechanisms | None = None,
        source_env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings if settings is not None else SandboxSettings()
        self._mechanisms = mechanisms
        self._source_env = source_env
        self._base: Path | None = None
        self._warned = False

    def _private_dirs(self) -> tuple[Path, Path]:
        if self._base is None:
            base = Path(tempfile.mkdtemp(prefix="dsh-tool-")).resolve()
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

    async def wrap(self, argv: list[str], cwd: str) -> list[str]:
        """``argv`` prefixed with the sandbox wrapper the settings and the system allow.

        Raises:
            SandboxUnavailableError: strict mode and a needed mechanism is missing (the
                message names it).
        """
        if self.settings.sandbox == "off":
            return argv
        mechanisms = await self._probe()
        deny_network = self.settings.sandbox_network == "deny"
        missing: list[str] = []
        options: list[str] = []
        if mechanisms.landlock_abi >= 1:
            home, tmp = self._private_dirs()
            options.append("--landlock")
            writable = [cwd, str(home), str(tmp)]
            writable += _WRITABLE_DEVICES
            for path in writable:
                options += ["--write", path]
            if deny_network:
                options.append("--deny-tcp")
        else:
            missing.append("Landlock (writes are not confined)")
        if deny_network:
            if mechanisms.netns_problem is None:
                options.append("--netns")
            else:
                missing.append(f"a network namespace ({mechanisms.netns_problem})")
        if missing:
            what = "; ".join(missing)
            if self.settings.sandbox == "strict":
                raise SandboxUnavailableError(
                    f"sandbox unavailable and DSH_SANDBOX=strict: missing {what}"
                )
            if not self._warned:
                self._warned = True
                print(f"dsh: sandbox incomplete, running without {what}", file=sys.stderr)
        if not options:
            return argv
        return [sys.executable, "-I", "-S", str(_WRAPPER), *options, "--", *argv]

    async def _probe(self) -> SandboxMechanisms:
        if self._mechanisms is None:
            self._mechanisms = await probe_mechanisms()
        return self._mechanisms


async def probe_mechanisms() -> SandboxMechanisms:
    """Ask a throwaway wrapper process what this system offers."""
    if not sys.platform.startswith("linux"):
        return SandboxMechanisms.none(f"not available on {sys.platform}")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-S",
        str(_WRAPPER),
        "--probe",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    try:
        found = json.loads(out)
        return SandboxMechanisms(int(found["landlock"]), found["netns"])
    except (ValueError, KeyError, TypeError):
        detail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return SandboxMechanisms.none(f"the sandbox probe failed: {detail[0]}")

"""Our own agent changes and reads nothing outside its run (SECURITY.md, "Our own agent").

The probe (``agents/escape_probe.py``) tries every way a file changes — content, mode, owner,
times, xattrs, names and links beside it, rename, unlink, also through an unconfined
process's ``/proc/<pid>/root`` — on sentinel files outside the run: one in ``/dev/shm`` (a
visible host mount: the refusal is the read-only mount's ``EROFS``, not a hidden path), one in
the host's ``/tmp``, the fake ``$HOME``'s ``.bashrc`` and a checkout's file; it tries to read
the home's key and the checkout's ``.env`` and ``.git/config``, and to write where the run
may. It runs as
the warm agent's forked child, through the cold launcher, and (slow) as a recorded ``bash``
command of the real agent, warm, ``--cold`` and under a scenario's ``clock:``, run without
bubblewrap so that the agent's own confinement is all that stands in its way. Each case
checks the sentinels' full state (kind, mode, bytes, mtime, xattrs) unchanged; the control
runs the same probe unconfined and changes everything.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from dsh_acp_agent import AgentForkServer
from dsh_core import ProcessConfinement, SandboxMechanisms, confined_command
from dsh_core import _process_confine as process_confine
from dsh_core._self_confine import EX_OSERR, landlock_abi
from dsh_core.plugins import DEFAULT_MODEL_PROVIDER
from dsh_scripted_server import resolve_profile
from dsh_snapshot import SnapshotSettings, load_scenario, run_scenario
from dsh_snapshot._warm import WarmAgents
from dsh_snapshot.cli import main
from dsh_snapshot.testing import full_state, said, session_log, tool_call

PROBE = Path(__file__).parent / "agents" / "escape_probe.py"
CLOCK = "2026-01-15T09:00:00"

pytestmark = pytest.mark.skipif(
    bool(SandboxMechanisms.probe().missing) and os.environ.get("CI") != "true",
    reason=f"no sandbox here: {SandboxMechanisms.probe().missing}",
)


@dataclass(frozen=True)
class World:
    """What lies outside the run, and the run's own folders."""

    shm: Path
    sentinel: Path
    home: Path
    checkout: Path
    run: Path

    @property
    def watched(self) -> dict[str, Path]:
        return {
            "shm": self.shm,
            "sentinel": self.sentinel,
            "home": self.home,
            "checkout": self.checkout,
        }

    def state(self) -> dict[str, dict[str, str]]:
        return {name: full_state(path) for name, path in self.watched.items()}

    def plan(self, write: dict[str, str] | None = None) -> dict[str, Any]:
        """The probe's plan: change and read the sentinels, write in the run."""
        run = {name: str(self.run / name) for name in ("cwd", "tmp", "sessions")}
        return {
            "change": {
                "shm": str(self.shm / "victim.txt"),
                "sentinel": str(self.sentinel / "victim.txt"),
                "home": str(self.home / ".bashrc"),
                "checkout": str(self.checkout / "README.md"),
            },
            "read": {
                "ssh_key": str(self.home / ".ssh" / "id_ed25519"),
                "dotenv": str(self.checkout / ".env"),
                "git_config": str(self.checkout / ".git" / "config"),
            },
            "write": run if write is None else write,
            "outside_pid": os.getpid(),
        }

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.home),
            "TMPDIR": str(self.run / "tmp"),
            "DSH_SESSIONS_ROOT": str(self.run / "sessions"),
        }

    def confinement(self, mode: str = "strict") -> ProcessConfinement:
        return ProcessConfinement(
            network=False,
            mode=cast(Any, mode),
            writable=(str(self.run),),
            hide=(str(self.checkout),),
        )


def _sentinel_file(path: Path) -> None:
    path.write_text("precious bytes\n")
    path.chmod(0o640)
    with contextlib.suppress(OSError):  # where the file system keeps user attributes
        os.setxattr(path, "user.dsh.sentinel", b"1")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm: no visible host mount to probe")
    shm = Path("/dev/shm") / f"dsh-sentinel-{uuid.uuid4().hex}"
    made = World(
        shm, tmp_path / "sentinel", tmp_path / "home", tmp_path / "checkout", tmp_path / "run"
    )
    for folder in (shm, made.sentinel, made.home / ".ssh", made.checkout / ".git"):
        folder.mkdir(parents=True)
    for folder in ("cwd", "tmp", "sessions"):
        (made.run / folder).mkdir(parents=True)
    _sentinel_file(shm / "victim.txt")
    _sentinel_file(made.sentinel / "victim.txt")
    _sentinel_file(made.home / ".bashrc")
    _sentinel_file(made.checkout / "README.md")
    base_url = resolve_profile(DEFAULT_MODEL_PROVIDER).env_name("base_url")
    (made.checkout / ".env").write_text(f"{base_url}=http://127.0.0.1:9/\n")
    (made.checkout / ".git" / "config").write_text("[core]\n")
    (made.home / ".ssh" / "id_ed25519").write_text("not yours\n")
    try:
        yield made
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def _assert_confined(report: dict[str, Any], world: World, before: dict[str, Any]) -> None:
    changed = {
        f"{label}.{op}": result
        for label, results in report["change"].items()
        for op, result in results.items()
        if result == "ok"
    }
    assert changed == {}, "the probe changed something outside its run"
    # Visible, and refused by the read-only mount: metadata included (Landlock would not).
    erofs = os.strerror(errno.EROFS)
    for op in ("append", "truncate", "chmod", "chown", "utime", "setxattr", "rename"):
        assert report["change"]["shm"][op] == erofs, op
    read = {f"{k}.{op}": r for k, v in report["read"].items() for op, r in v.items() if r == "ok"}
    assert read == {}, "the probe read the home's key or the checkout's .env"
    assert {k: set(v.values()) for k, v in report["write"].items()} == {
        k: {"ok"} for k in report["write"]
    }
    if landlock_abi() >= 6:  # Landlock scoping: no signal to a process outside
        assert report["signal"] == os.strerror(errno.EPERM)
    assert world.state() == before


@pytest.fixture(scope="module")
def probe_server() -> Iterator[AgentForkServer]:
    path = os.pathsep.join([str(PROBE.parent), *sys.path])
    env = dict(os.environ, PYTHONPATH=path)
    with AgentForkServer(entry="escape_probe:main", preload=["escape_probe"], env=env) as server:
        yield server


def _forked_probe(
    server: AgentForkServer, world: World, confinement: ProcessConfinement
) -> tuple[dict[str, Any], str, int]:
    env = world.env() | {"PROBE_PLAN": json.dumps(world.plan())}
    child = server.spawn(world.run / "cwd", env, confinement=confinement)
    child.stdin.close()
    out, err = child.stdout.read().decode(), child.stderr.read().decode()
    code = child.wait(timeout=60)
    child.stdout.close()
    child.stderr.close()
    return (json.loads(out) if out else {}), err, code


@pytest.mark.slow  # a fork server of its own; test_acp_forkserver_confine checks the mounts
def test_a_forked_agent_changes_and_reads_nothing_outside_its_run(
    probe_server: AgentForkServer, world: World
) -> None:
    before = world.state()
    report, err, code = _forked_probe(probe_server, world, world.confinement())
    assert (code, err) == (0, ""), err
    _assert_confined(report, world, before)


@pytest.mark.slow
def test_the_same_probe_unconfined_changes_everything_so_the_refusals_are_real(
    probe_server: AgentForkServer, world: World
) -> None:
    before = world.state()
    report, _, code = _forked_probe(probe_server, world, world.confinement("off"))
    assert code == 0
    for label, results in report["change"].items():
        # tmpfs keeps user xattrs from Linux 6.6 on.
        allowed = {"ok", os.strerror(errno.EOPNOTSUPP)} if label == "shm" else {"ok"}
        assert {op: r for op, r in results.items() if r not in allowed} == {}, label
    assert {r for v in report["read"].values() for r in v.values()} == {"ok"}
    assert report["signal"] == "ok"
    assert world.state() != before


MISSING = "the seccomp filter (libseccomp cannot be loaded: a test removed it)"


def _without_seccomp(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(unix_sockets: bool) -> tuple[str | None, str | None]:
        return None, MISSING

    monkeypatch.setattr(process_confine, "_seccomp_base64", unavailable)


def _launched_probe(
    world: World, confinement: ProcessConfinement
) -> subprocess.CompletedProcess[str]:
    # The probe reads itself from the run (the checkout may lie in a hidden folder).
    probe = world.run / "tmp" / "probe.py"
    shutil.copy(PROBE, probe)
    argv = [sys.executable, "-I", "-S", str(probe), json.dumps(world.plan())]
    cwd = world.run / "cwd"
    command = confined_command(confinement, argv, str(cwd), world.env())
    return subprocess.run(
        command, cwd=cwd, env=world.env(), capture_output=True, text=True, timeout=60, check=False
    )


def test_the_cold_launcher_applies_the_same_policy_before_the_agent_starts(
    world: World,
) -> None:
    before = world.state()
    done = _launched_probe(world, world.confinement())
    assert (done.returncode, done.stderr) == (0, "")
    _assert_confined(json.loads(done.stdout), world, before)


def test_strict_refuses_to_start_an_agent_it_cannot_confine_in_one_line(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_seccomp(monkeypatch)
    done = _launched_probe(world, world.confinement())
    assert done.returncode == EX_OSERR
    assert done.stdout == ""  # the agent never ran
    assert done.stderr == (
        f"dsh-acp-agent: agent confinement unavailable and DSH_SANDBOX=strict: {MISSING}\n"
    )
    # warn: it runs with the rest of the policy, and says what is missing.
    before = world.state()
    warned = _launched_probe(world, world.confinement("warn"))
    assert warned.stderr == f"dsh-acp-agent: confined without {MISSING}\n"
    report = json.loads(warned.stdout)
    assert report["change"]["shm"]["chmod"] == os.strerror(errno.EROFS)
    assert world.state() == before


@pytest.mark.slow
def test_the_gate_fails_a_cold_run_it_cannot_confine_saying_why(
    scenario_copy: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    folder = scenario_copy("text-turn")
    _without_seccomp(monkeypatch)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("NO_COLOR", "1")
    code = main(["replay", str(folder), "--cold", "--store", "jsonl", "--timeout", "60"])
    out = " ".join(capfd.readouterr().out.split())
    assert code == 1
    assert f"agent confinement unavailable and DSH_SANDBOX=strict: {MISSING}" in out


# --- the real agent ---------------------------------------------------------------------------


def _probing_scenario(root: Path, world: World, clock: bool) -> Path:
    """A scenario whose recorded model runs the probe as a ``bash`` command."""
    folder = root / "scenarios" / "sdk" / "escape"
    (folder / "workspace").mkdir(parents=True)
    (folder / "workspace" / "readme.txt").write_text("hi\n")
    shutil.copy(PROBE, folder / "probe.py")
    plan = json.dumps(world.plan(write={"cwd": "."}))
    command = shlex.join([sys.executable, "-I", "-S", str(folder / "probe.py"), plan])
    (folder / "session.jsonl").write_text(session_log(tool_call(command), said("done")))
    steps = [{"op": "initialize"}, {"op": "newSession"}, {"op": "prompt", "text": "go"}]
    (folder / "input.json").write_text(json.dumps({"steps": steps}))
    meta = "version: 1\nprofile: sdk\nstore: jsonl\nrecording: scripted\n"
    (folder / "snapshot.yml").write_text(meta + (f'clock: "{CLOCK}"\n' if clock else ""))
    return folder


def _tool_report(folder: Path) -> dict[str, Any]:
    for line in (folder / "session.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "tool/result":
            return cast(dict[str, Any], json.loads(event["data"]["content"][0]["text"]))
    raise AssertionError("the refreshed session holds no tool result")


@pytest.mark.slow
@pytest.mark.parametrize("path", ["warm", "cold", "clock"])
def test_the_real_agent_cannot_change_or_read_what_lies_outside_its_run(
    path: str, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path == "clock" and shutil.which("faketime") is None:
        pytest.skip("faketime (Debian package) is not installed")
    folder = _probing_scenario(tmp_path, world, clock=path == "clock")
    monkeypatch.setenv("CI", "true")  # strict: a missing mechanism fails the run
    monkeypatch.setenv("HOME", str(world.home))
    monkeypatch.chdir(world.checkout)  # the gate's checkout: hidden from its agent
    before = world.state()
    # The command runs without bubblewrap: only the agent's own confinement is in its way.
    settings = SnapshotSettings(mode="refresh", agent_env=(("DSH_SANDBOX", "off"),))
    with contextlib.ExitStack() as stack:
        agents = stack.enter_context(WarmAgents(1)) if path == "warm" else None
        result = run_scenario(load_scenario(folder), settings, "jsonl", agents)
    assert result.ok, result.failures
    _assert_confined(_tool_report(folder), world, before)

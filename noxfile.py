"""The one command surface of dsh-py: CI and people run these sessions, nothing else.

Every session installs what it needs from ``uv.lock`` into its own environment with uv, and
uv never downloads an interpreter: the machines carry Python 3.11 and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess

import nox

os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
os.environ.setdefault("UV_PYTHON_PREFERENCE", "only-system")

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv"
nox.options.sessions = ["lint", "typecheck", "tests", "release_check"]
nox.options.error_on_missing_interpreters = True
# Environments are kept between runs: every session's `uv sync --exact` makes its environment
# exactly the locked one anyway, and a kept one skips the venv creation and bytecode compiling
# (`nox -N` or deleting .nox starts from nothing).
nox.options.reuse_venv = "yes"

ROOT = pathlib.Path(__file__).parent
PYTHON = "3.11"
# Third-party wheels from uv.lock, fetched once: every install check then runs --no-index.
WHEELHOUSE = ROOT / ".nox" / "wheelhouse"
# Suites of a few CPU-seconds run in one process: two xdist workers would each pay the
# interpreter, pytest and plugin start-up again and cost more than they save (measured with
# -n 2 / -n 0: llm-replay 5.6 / 2.4 CPU-s, subagent-spawn 4.3 / 1.6, subagent-fork 4.0 / 1.3).
# llm-openai is no longer one of them: it holds the wire's tests now (issue 21), waits included.
SERIAL_TESTS = {"llm-replay", "subagent-fork", "subagent-spawn"}
SOURCES = sorted([*ROOT.glob("packages/*/src"), *ROOT.glob("tests/plugins/*/src")])
PACKAGES = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())


def sync(session: nox.Session, *groups: str, package: str | None = None) -> None:
    """Install the workspace (or one member) and dependency groups exactly as locked.

    Bytecode is compiled at install: with ``PYTHONDONTWRITEBYTECODE`` set (as on many CI images)
    and none compiled, every interpreter the tests and the gate start recompiles each module it
    imports (a fresh agent answering ``initialize``: 477 ms CPU without, 242 ms with).
    """
    args = ["uv", "sync", "--frozen", "--exact", "--no-default-groups"]
    args += ["--all-packages"] if package is None else ["--package", package]
    for group in groups:
        args += ["--group", group]
    # uv's --compile-bytecode walks all of site-packages on every sync (2-4 s a session, ~40 s
    # of the README's test command): an environment already synced with these arguments from
    # this lock has its bytecode, so the walk runs only when the sync can change something.
    location = pathlib.Path(session.virtualenv.location)
    lock = hashlib.sha256((ROOT / "uv.lock").read_bytes()).hexdigest()
    wanted, stamp = f"{lock} {' '.join(args)}\n", location / ".dsh-synced"
    compiled = stamp.is_file() and stamp.read_text() == wanted
    stamp.unlink(missing_ok=True)  # written again only after a complete sync
    session.run_install(
        *args,
        *([] if compiled else ["--compile-bytecode"]),
        env={"UV_PROJECT_ENVIRONMENT": str(location)},
    )
    stamp.write_text(wanted)
    # uv compiles what it puts in site-packages; the workspace members are installed editable
    # (their modules load from packages/*/src), so their bytecode is compiled here (into the
    # git-ignored __pycache__ folders; up-to-date files are skipped).
    session.run_install("python", "-m", "compileall", "-q", *map(str, SOURCES))


@nox.session(python=PYTHON)
@nox.parametrize("package", [*PACKAGES, "workspace"])
def tests(session: nox.Session, package: str) -> None:
    """Run one package's tests in an environment holding only it and what it declares."""
    # "workspace" is the cross-package tests/ folder, which needs every member.
    if package == "workspace":
        # pip and an offline wheelhouse: tests/ follows the README's install-from-a-checkout.
        sync(session, "test", "release", "test-plugins")
        session.run("python", "tools/check_wheels.py", "wheelhouse", str(WHEELHOUSE))
        session.env["DSH_WHEELHOUSE"] = str(WHEELHOUSE)
        session.env["DSH_REQUIRE_TEST_PLUGINS"] = "1"  # tests/test_store_plugin.py may not skip
        target = "tests"
    else:
        sync(session, "test", package=f"dsh-{package}")
        target = f"packages/{package}"
    # The SIGKILL soaks are `nox -s crash`'s (CI runs it with 50 kills per backend, as these
    # tests did here): the test suite stays minutes, not a soak.
    workers = "0" if package in SERIAL_TESTS else "auto"
    # The slowest end-to-end tests are `nox -s tests_slow`'s (CI runs it), so this command
    # stays under four minutes on an idle two-core machine.
    pytest = ["pytest", "-m", "not crash and not slow", "-n", workers, "--dist", "loadgroup"]
    session.run(*pytest, target, *session.posargs)


@nox.session(python=PYTHON)
def tests_slow(session: nox.Session) -> None:
    """The slowest end-to-end tests (marked slow: whole foreign-agent record/replay cycles)."""
    sync(session, "test", package="dsh-snapshot")
    pytest = ["pytest", "-m", "slow and not crash", "-n", "auto", "--dist", "loadgroup"]
    session.run(*pytest, "packages/snapshot", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Check style and formatting with ruff."""
    sync(session, "lint")
    session.run("ruff", "check", ".", *session.posargs)
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Type-check every package, the tools, the benchmarks and this file with pyright strict."""
    sync(session, "test", "typecheck", "bench", "browser")
    session.run("pyright", *session.posargs)


def build_and_check(session: nox.Session, *, release: bool) -> None:
    """Build the distributions into dist/ and install each wheel alone from there, offline."""
    sync(session, "release")
    dist = ROOT / "dist"
    kinds = [] if release else ["--wheel"]  # a release also builds the sdists
    build_args = ["uv", "build", "--all-packages", "--no-sources", *kinds, "-o", str(dist)]
    session.run(*build_args, "--clear", external=True)
    if release:
        session.run("python", "tools/version.py", "check")
        built = sorted([*dist.glob("*.whl"), *dist.glob("*.tar.gz")])
        session.run("twine", "check", "--strict", *map(str, built))
    session.run("python", "tools/check_wheels.py", "wheelhouse", str(WHEELHOUSE))
    examples = ["--examples"] if release else []
    session.run(
        "python", "tools/check_wheels.py", "check", *examples, str(dist), str(WHEELHOUSE), *PACKAGES
    )


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Build every wheel, then install each alone in a clean venv and import all its modules."""
    build_and_check(session, release=False)


@nox.session(python=PYTHON)
def release_check(session: nox.Session) -> None:
    """Build sdists and wheels, twine-check them, install each wheel alone and run its README."""
    build_and_check(session, release=True)


@nox.session(python=PYTHON)
def crash(session: nox.Session) -> None:
    """SIGKILL a writer at random moments 500+ times per backend and check every returned batch."""
    sync(session, "test")
    # DSH_CRASH_KILLS from the caller wins: .ci/run runs this session with a few kills per
    # backend, so the session itself cannot rot between the soak runs.
    kills = os.environ.get("DSH_CRASH_KILLS", "500")
    session.run(
        "pytest", "-m", "crash", "-n", "auto", *session.posargs, env={"DSH_CRASH_KILLS": kills}
    )


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run the benchmarks in bench/ and rewrite BENCHMARKS.md with the measured numbers."""
    sync(session, "test", "bench")
    session.run("python", "bench/run.py", *session.posargs)


# dsh-snapshot's options that take a value: their value is never a path.
_SNAPSHOT_VALUED = {"-k", "-j", "--jobs", "--timeout", "--store", "--retries", "--max-age"}


def _snapshot_args(posargs: list[str]) -> list[str]:
    """``nox -s snapshot… -- [PATH…] [-k TEXT] [--options]``: the paths given replace the default
    ``snapshots``; every argument is passed on as given, after the session's own ``--jobs``
    (so yours wins)."""
    paths = [
        arg
        for before, arg in zip(["", *posargs], posargs, strict=False)
        if not arg.startswith("-") and before not in _SNAPSHOT_VALUED
    ]
    return [*posargs] if paths else ["snapshots", *posargs]


@nox.session(python=PYTHON)
def snapshot(session: nox.Session) -> None:
    """The keyless replay gate: every scenario under snapshots/, in parallel, with a summary."""
    sync(session, "test")
    if "--splits" in session.posargs:
        # One shard of a CI matrix: pytest-split cuts the items by the committed .test_durations.
        gate = ["--dsh-snapshots", "snapshots", "-n", "auto", "-p", "no:cacheprovider"]
        # The project's configuration, never one found in the scenario tree (a pull request's
        # snapshots/pytest.ini could deselect a failing scenario or load a plugin of its own).
        gate = ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), *gate]
        session.run("pytest", *gate, *session.posargs)
    else:
        report = ["--html-report", str(ROOT / "build" / "snapshot-report.html")]
        args = _snapshot_args(session.posargs)
        session.run("dsh-snapshot", "replay", "--jobs", "auto", *report, *args)


@nox.session(python=PYTHON, default=False)
def dsh_snapshot(session: nox.Session) -> None:
    """The dsh-snapshot CLI in the gate's environment: `-- show PATH`, `-- review PATH`…"""
    # The README's failure flow needs the CLI right after its two set-up commands, before a
    # user has any environment of their own; this is the gate's, kept between runs.
    sync(session, "test")
    session.run("dsh-snapshot", *(session.posargs or ["--help"]))


@nox.session(python=PYTHON, default=False)
def snapshot_postgres(session: nox.Session) -> None:
    """The replay gate on the PostgreSQL store: DSH_POSTGRES_DSN's server, else a private one."""
    sync(session, "test")
    gate = ["dsh-snapshot", "replay", "--jobs", "auto", "--store", "postgres"]
    gate += _snapshot_args(session.posargs)
    if os.environ.get("DSH_POSTGRES_DSN"):
        session.run(*gate)
    else:  # initdb + pg_ctl of the installed PostgreSQL, for the gate's duration
        session.run("python", "-m", "dsh_persistence_postgres.testing", *gate)


@nox.session(python=PYTHON)
def snapshot_refresh(session: nox.Session) -> None:
    """Keyless: replay the committed scripts and rewrite the expected outputs in place."""
    sync(session, "test")
    session.run("dsh-snapshot", "refresh", "--jobs", "auto", *_snapshot_args(session.posargs))


@nox.session(python=PYTHON, default=False)
def snapshot_record(session: nox.Session) -> None:
    """Re-record every scenario against the live API (reads .env); skips without a key."""
    sync(session, "test")
    session.run("dsh-snapshot", "record", *_snapshot_args(session.posargs))


@nox.session(python=PYTHON, default=False)
def snapshot_record_contract(session: nox.Session) -> None:
    """Keyless: snapshot_record against the strict contract server, then replay and refresh it."""
    sync(session, "test")
    session.run("python", "tools/record_contract.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def record_drift(session: nox.Session) -> None:
    """After a re-record: which scenarios drifted, as markdown (also to $GITHUB_STEP_SUMMARY)."""
    sync(session, "test")
    session.run("python", "tools/record_drift.py", *session.posargs)


@nox.session(python=PYTHON)
def snapshot_proof(session: nox.Session) -> None:
    """Red-to-green: the fork scenarios must fail with the seedLength slice off, pass with it on."""
    sync(session, "test")
    session.run("dsh-snapshot", "proof", *_snapshot_args(session.posargs))


@nox.session(python=PYTHON)
def compat(session: nox.Session) -> None:
    """Replay the upstream TypeScript recordings through our agent and print the table."""
    sync(session, "test")
    session.run("python", "tools/compat.py", *session.posargs)


def _upstream_src() -> pathlib.Path | None:
    """``$DSH_UPSTREAM_SRC``, else ``shared/upstream-src`` beside an ancestor of the checkout."""
    configured = os.environ.get("DSH_UPSTREAM_SRC")
    if configured:
        return pathlib.Path(configured)
    for parent in ROOT.resolve().parents:
        if (parent / "shared" / "upstream-src").is_dir():
            return parent / "shared" / "upstream-src"
    return None


@nox.session(python=PYTHON)
def upstream_harness(session: nox.Session) -> None:
    """Our exported scenarios through upstream's own June ACP snapshot harness (node, tsx)."""
    # `-- SCENARIO…` narrows it. Needs node >= 20.6 and npm (pins:
    # tools/upstream_harness/package-lock.json) and upstream's sources (../shared/upstream-src
    # or DSH_UPSTREAM_SRC); without them it skips saying which, except under CI=true: it fails.
    src = _upstream_src()
    node, npm = shutil.which("node"), shutil.which("npm")
    missing = [
        what
        for what, found in (("upstream's sources", src), ("node", node), ("npm", npm))
        if found is None
    ]
    if missing:
        message = f"upstream_harness: no {', no '.join(missing)} (see tools/upstream_harness)"
        if os.environ.get("CI", "").lower() == "true":
            session.error(message)
        session.skip(message)
    assert src is not None
    assert node is not None
    assert npm is not None
    sync(session, "test")
    stage = ROOT / "build" / "upstream-harness"
    session.run(
        "python", "tools/upstream_harness/stage.py", "--upstream-src", str(src),
        "--stage", str(stage), *session.posargs,
    )  # fmt: skip
    agent = pathlib.Path(session.bin) / "dsh-acp-agent"
    sandbox = "strict" if os.environ.get("CI", "").lower() == "true" else "warn"
    env = {
        "DSH_UPSTREAM_HARNESS_AGENT": json.dumps([str(agent)]),
        "DSH_SANDBOX": sandbox,
        "DSH_SANDBOX_NETWORK": "deny",
    }
    with session.chdir(stage):
        # npm ci (exactly the lock; esbuild's binary comes from its platform package, so no
        # install script runs) only when the lock changed since the last install here.
        digest = hashlib.sha256((stage / "package-lock.json").read_bytes()).hexdigest()
        stamp = stage / "node_modules" / ".dsh-lock-sha256"
        if not stamp.is_file() or stamp.read_text() != digest:
            npm_env = {"npm_config_update_notifier": "false"}
            session.run(
                npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", external=True, env=npm_env
            )
            stamp.write_text(digest)
        session.run(node, "--import", "tsx", "run.ts", "manifest.json", external=True, env=env)


@nox.session(python=PYTHON)
def html_check(session: nox.Session) -> None:
    """Open the gate's HTML report in headless Chromium (the OS package) through Playwright."""
    chromium = os.environ.get("DSH_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        # The OS package only: Playwright is pointed at it, never at a downloaded browser build.
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run(*sudo, "apt-get", "update", external=True, env=env)
        session.run(*sudo, "apt-get", "install", "-y", "chromium", external=True, env=env)
        chromium = shutil.which("chromium")
    if chromium is None:
        session.error("chromium is not on PATH after apt-get install chromium")
    sync(session, "test", "browser")
    env = {"DSH_CHROMIUM": chromium, "DSH_HTML_SCREENSHOT": str(ROOT / "build" / "html-report.png")}
    session.run("pytest", "tests/browser", "-p", "no:cacheprovider", *session.posargs, env=env)


# --- third-party ACP agents ------------------------------------------------------------------
THIRD_PARTY = ROOT / "tests" / "third_party"
# Qwen Code 0.15.10 is the newest release whose engines accept node 20 (0.21+ need node 22).
NODE_MAJOR = 20
# Mistral Vibe needs Python >= 3.12: it gets a venv of its own, never the project's 3.11 one.
# Its pins were resolved for 3.12 (mistral-vibe 3.0.3 pins a certifi release PyPI does not
# serve, so 3.0.2): `echo mistral-vibe==3.0.2 | uv pip compile --python-version 3.12
# --generate-hashes --no-header - -o tests/third_party/mistral-vibe.txt`.
VIBE_PYTHONS = ("3.12", "3.13")


def _stamped(folder: pathlib.Path, *inputs: pathlib.Path) -> tuple[bool, pathlib.Path, str]:
    """Whether ``folder`` was installed from exactly these pin files (and the stamp to write)."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in inputs)).hexdigest()
    stamp = folder / ".dsh-installed"
    return stamp.is_file() and stamp.read_text() == digest, stamp, digest


def _install_qwen(session: nox.Session, dest: pathlib.Path) -> pathlib.Path:
    """Qwen Code into ``dest`` from tests/third_party/package-lock.json (its tarball's
    integrity checked), no install scripts, no optional packages; returns the ``qwen``
    launcher. Not ``npm ci``: Qwen names optional platform packages (clipboard builds for
    other systems) that the registry does not have, which ``npm ci`` refuses as a lock out of
    sync; without optional packages its shell tool runs through child_process, not node-pty,
    the same on every machine. Qwen has no dependencies, so the one pin is the whole tree."""
    node = shutil.which("node")
    if node is None:
        session.error(f"Qwen Code needs node >= {NODE_MAJOR} on PATH (Debian/Ubuntu: nodejs)")
    version = session.run(node, "--version", silent=True, external=True) or ""
    major = int(str(version).strip().lstrip("v").split(".")[0] or 0)
    if major < NODE_MAJOR:
        session.error(f"Qwen Code 0.15.10 needs node >= {NODE_MAJOR}; {node} is {version}")
    lock, manifest = THIRD_PARTY / "package-lock.json", THIRD_PARTY / "package.json"
    done, stamp, digest = _stamped(dest, manifest, lock)
    if not done:
        dest.mkdir(parents=True, exist_ok=True)
        stamp.unlink(missing_ok=True)
        shutil.copyfile(manifest, dest / "package.json")
        shutil.copyfile(lock, dest / "package-lock.json")
        npm = ["npm", "install", "--ignore-scripts", "--omit=optional", "--no-audit", "--no-fund"]
        session.run(*npm, "--loglevel=error", "--prefix", str(dest), external=True)
        stamp.write_text(digest)
    return dest / "node_modules" / ".bin" / "qwen"


def _python_at_least_312(session: nox.Session) -> str:
    """A Python >= 3.12 of this machine that runs: pyenv's installed versions (``PYENV_ROOT``,
    else ~/.pyenv), then python3.13/python3.12 on PATH. Each candidate is run once: a pyenv
    shim on PATH for a version that is not selected fails, and is skipped."""
    root = pathlib.Path(os.environ.get("PYENV_ROOT") or "~/.pyenv").expanduser()
    candidates = [
        str(found)
        for version in VIBE_PYTHONS
        for found in sorted(root.glob(f"versions/{version}*/bin/python{version}"), reverse=True)
    ]
    candidates += [found for v in VIBE_PYTHONS if (found := shutil.which(f"python{v}"))]
    check = "import sys; assert sys.version_info >= (3, 12); print(sys.executable)"
    for candidate in candidates:
        run = subprocess.run([candidate, "-c", check], capture_output=True, text=True, check=False)
        if run.returncode == 0:
            return run.stdout.strip()
    session.error(
        "Mistral Vibe needs Python >= 3.12 and none runs here (pyenv's versions/, python3.12 "
        "or python3.13 on PATH): install one, e.g. `pyenv install 3.12`"
    )


def _install_vibe(session: nox.Session, dest: pathlib.Path) -> pathlib.Path:
    """A venv of its own for Mistral Vibe from tests/third_party/mistral-vibe.txt (every
    package pinned with hashes), bytecode compiled: the agent runs in a sandbox where its
    site-packages are read-only, so an uncompiled one recompiles on every start."""
    requirements = THIRD_PARTY / "mistral-vibe.txt"
    done, stamp, digest = _stamped(dest, requirements)
    if not done:
        python = _python_at_least_312(session)
        session.run("uv", "venv", "--clear", "--python", python, str(dest), external=True)
        sync_args = ["uv", "pip", "sync", "--require-hashes", "--compile-bytecode"]
        sync_args += ["--python", str(dest / "bin" / "python"), str(requirements)]
        session.run(*sync_args, external=True)
        stamp.write_text(digest)
    return dest / "bin" / "vibe-acp"


@nox.session(python=PYTHON)
def third_party_agents(session: nox.Session) -> None:
    """Install Qwen Code (npm) and Mistral Vibe (PyPI) pinned, then gate them keylessly."""
    sync(session, "test")
    # Outside the checkout: the agents' sandbox hides the checkout (its .env and .git) and
    # /tmp, so they are installed in the user's cache (DSH_THIRD_PARTY_HOME overrides it).
    cache = os.environ.get("DSH_THIRD_PARTY_HOME") or "~/.cache/dsh-py/third-party"
    home = pathlib.Path(cache).expanduser()
    launchers = {
        "qwen": _install_qwen(session, home / "qwen"),
        "vibe-acp": _install_vibe(session, home / "vibe"),
    }
    # Only the launchers go on PATH (not the vibe venv's own python).
    bin_dir = home / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, target in launchers.items():
        link = bin_dir / name
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    session.env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    session.env["DSH_THIRD_PARTY_AGENTS"] = "required"  # the tests may not skip
    # Two workers: each test is one agent run waiting on node or Python start-up most of the time.
    pytest = ["pytest", "tests/third_party", "-n", "2", "-p", "no:cacheprovider", "--durations=0"]
    session.run(*pytest, *session.posargs)

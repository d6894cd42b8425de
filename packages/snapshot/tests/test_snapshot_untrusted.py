"""The hostile catalogue, part II (issue 20): untrusted files, where the key goes, key bytes in
artefacts, bounded work, one verdict. (Part I is ``test_snapshot_hostile.py``; the proxy's
cases over real HTTP are ``packages/llm-proxy/tests/test_proxy_hostile.py``.)

Every case runs the real CLI (``dsh_snapshot.cli.main``, the real agent subprocess where the
case gets that far) with a fake ``$HOME``, ``TMPDIR`` and keys, and asserts, besides its own
point: the sentinel tree and the fake ``$HOME`` unchanged (kind, mode, bytes, mtime, xattrs);
no key, raw or encoded (hex, percent, base64 at any alignment), in stdout, stderr or any byte
written under the sandbox; the output names the file and field at fault; the run ended within
its timeout and left no process behind (by parent pid, and by a marker in the environment).
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from dsh_core.plugins import (
    DEFAULT_MODEL_PROVIDER,
    env_prefix,
    model_provider,
    store_backend_names,
)
from dsh_snapshot.cli import main
from dsh_snapshot.testing import (
    META,
    Sandbox,
    full_state,
    said,
    session_log,
    tool_call,
    tree_state,
)

_TIMEOUT = 30.0
_MARKER = "DSH_HOSTILE_RUN_MARKER"


def _children() -> set[int]:
    me, out = os.getpid(), set[int]()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                out.add(int(entry))
    return out


def _marked(marker: str) -> list[int]:
    found: list[int] = []
    needle = f"{_MARKER}={marker}".encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if needle in Path(f"/proc/{entry}/environ").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


@dataclass
class World:
    """A sandbox, the CLI run in it, and everything a case may look at afterwards."""

    box: Sandbox
    marker: str
    env: pytest.MonkeyPatch | None = None
    out: str = ""
    err: str = ""
    code: int | None = None
    notes: dict[str, Any] = field(default_factory=dict[str, Any])

    def git(self, *args: str, cwd: Path | None = None) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=cwd or self.box.scenarios,
            check=True,
            capture_output=True,
        )

    def repo(self) -> Path:
        """``scenarios/`` as a git work tree (what a checkout of a pull request is)."""
        self.git("init", "-q")
        return self.box.scenarios


@dataclass(frozen=True)
class Case:
    """One hostile case: ``build`` lays it out and returns the CLI arguments; ``expect`` are
    substrings the output must hold; ``check`` looks at anything else afterwards."""

    name: str
    build: Callable[[World], list[str]]
    expect: tuple[str, ...] = ()
    code: int | None = None
    check: Callable[[World], None] | None = None
    cwd: str = "tmpdir"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    box = Sandbox.create(tmp_path)
    marker = os.urandom(8).hex()
    monkeypatch.setenv("HOME", str(box.home))
    monkeypatch.setenv("TMPDIR", str(box.tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv(_KEY, box.key)
    monkeypatch.setenv("OPENAI_API_KEY", box.other_key)
    monkeypatch.setenv(_MARKER, marker)
    monkeypatch.delenv(f"{_PREFIX}BASE_URL", raising=False)
    monkeypatch.chdir(box.tmpdir)
    return World(box, marker, monkeypatch)


def _run(world: World, case: Case, capfd: pytest.CaptureFixture[str]) -> None:
    box = world.box
    args = case.build(world)
    if case.cwd != "tmpdir":
        os.chdir(box.root / case.cwd)
    outside = {"sentinel": full_state(box.sentinel), "home": full_state(box.home)}
    before = tree_state(box.root)
    children = _children()
    start = time.monotonic()
    world.code = main(args)
    elapsed = time.monotonic() - start
    world.out, world.err = capfd.readouterr()
    text = re.sub(r"\s+", " ", world.out + world.err)
    assert box.leaks(world.out.encode()) == [], "a key reached stdout"
    assert box.leaks(world.err.encode()) == [], "a key reached stderr"
    for rel, state in tree_state(box.root).items():
        if state != before.get(rel) and state.startswith("file:"):
            assert box.leaks((box.root / rel).read_bytes()) == [], f"a key was written to {rel}"
    assert {"sentinel": full_state(box.sentinel), "home": full_state(box.home)} == outside
    assert list(box.tmpdir.iterdir()) == [], "the run left files in its temp dir"
    assert elapsed < _TIMEOUT + 15, f"the run took {elapsed:.0f} s"
    assert _children() <= children, "the run left a child process"
    assert _marked(world.marker) == [], "a process of the run is still alive"
    if case.code is not None:
        assert world.code == case.code, text
    for needle in case.expect:
        assert needle in text, text
    if case.check is not None:
        case.check(world)


# --- builders -----------------------------------------------------------------------------------


def _replay(folder: Path, *extra: str) -> list[str]:
    return [
        "replay",
        str(folder),
        "--store",
        "jsonl",
        "--jobs",
        "1",
        "--timeout",
        "30",
        *extra,
    ]


def _bash_scenario(world: World, command: str, name: str = "bash") -> Path:
    """A scenario whose recorded model ran ``command`` (replay runs it again, for real)."""
    log = session_log(tool_call(command), said("done"))
    return world.box.scenario(name, {"session.jsonl": log, "workspace/readme.txt": "hi\n"})


def _dotenv(tracked: bool, body: Callable[[World], str]) -> Callable[[World], list[str]]:
    def build(world: World) -> list[str]:
        from dsh_scripted_server import ScriptedModelServer  # noqa: PLC0415 - record cases

        # Both servers play the record provider's profile (its models, for the preflight).
        profile = DEFAULT_MODEL_PROVIDER

        repo = world.repo()
        folder = world.box.scenario("record")
        (folder / "snapshot.yml").write_text(META.replace("scripted", "live"))
        real = ScriptedModelServer(
            cast(Any, [[said("ok")]]), api_key=world.box.key, profile=profile
        )
        evil = ScriptedModelServer(cast(Any, [[said("ok")]]), profile=profile)
        world.notes["servers"] = (real.__enter__(), evil.__enter__())
        assert world.env is not None
        world.env.setenv(f"{_PREFIX}BASE_URL", real.base_url)
        # The session-scripted server routes by this header (the public API needs none).
        world.env.setenv(f"{_PREFIX}SEND_SESSION_ID", "true")
        world.notes["evil_url"] = evil.base_url
        (repo / ".env").write_text(body(world))
        if tracked:
            world.git("add", ".env")
            world.git("commit", "-qm", "a pull request's .env")
        return ["record", str(folder), "--timeout", "30"]

    return build


def _no_request_to_evil(world: World) -> None:
    real, evil = world.notes["servers"]
    try:
        assert evil.requests == [], "the key went where a file in the checkout said"
        assert real.requests, "the record never reached the configured endpoint"
    finally:
        real.__exit__(None, None, None)
        evil.__exit__(None, None, None)


def _pending(manifest: Callable[[World], dict[str, Any]], tracked: bool = False):
    def build(world: World) -> list[str]:
        world.repo()
        folder = world.box.scenario("pend", {"session.jsonl": session_log(said("old"))})
        pending = folder / ".pending" / "jsonl"
        pending.mkdir(parents=True)
        (pending / "session.jsonl").write_text(session_log(said("what the PR wants")))
        body: dict[str, Any] = {
            "version": 1,
            "store": "jsonl",
            "acceptable": True,
            "failures": ["planted"],
            "inputs": {},
            "files": ["session.jsonl"],
            "agent": None,
            **manifest(world),
        }
        deep = "[" * 5000 + "]" * 5000
        (pending / "pending.json").write_text(json.dumps(body).replace('"<deep>"', deep))
        if tracked:
            world.git("add", "-f", ".")
            world.git("commit", "-qm", "planted pending outputs")
        return ["accept", str(folder)]

    return build


def _unchanged_fixture(world: World) -> None:
    folder = world.box.scenarios / "sdk" / "pend"
    assert "what the PR wants" not in (folder / "session.jsonl").read_text()


def _linked(name: str, target: Callable[[World], Path | str]) -> Callable[[World], list[str]]:
    def build(world: World) -> list[str]:
        folder = world.box.scenario("linked")
        (folder / name).unlink(missing_ok=True)
        (folder / name).symlink_to(target(world))
        return _replay(folder)

    return build


def _deep(rel: str, text: Callable[[str], str]) -> Callable[[World], list[str]]:
    def build(world: World) -> list[str]:
        folder = world.box.scenario("deep")
        (folder / rel).write_text(text("[" * 50_000 + "]" * 50_000))
        return _replay(folder)

    return build


def _meta(extra: str, name: str = "meta") -> Callable[[World], list[str]]:
    def build(world: World) -> list[str]:
        folder = world.box.scenario(name)
        (folder / "snapshot.yml").write_text(META + extra)
        return _replay(folder)

    return build


def _no_raw_escape(world: World) -> None:
    assert "\x1b]" not in world.out + world.err
    assert "\x07" not in world.out + world.err


def _review_planted(world: World) -> list[str]:
    """Pending outputs whose text hides a line (SGR conceal) and reverses one (RLO), shown by
    ``review`` (the class: scenario data in what the CLI prints)."""
    build = _pending(lambda w: {})
    args = build(world)
    planted = world.box.scenarios / "sdk" / "pend" / ".pending" / "jsonl" / "session.jsonl"
    text = session_log(said("FAIL\x1b[8m hidden \x1b[0m\u202e reversed"))
    # Raw in the file (not JSON-escaped), as a hostile pull request would write it.
    planted.write_text(text.replace("\\u001b", "\x1b").replace("\\u202e", "\u202e"))
    assert world.env is not None
    world.env.setattr(sys, "stdin", io.StringIO("s\n"))  # review asks: skip
    return ["review", *args[1:]]


def _review_linked_child(world: World) -> list[str]:
    """A committed child log that is a link to an outside credentials file: review compares
    it with the pending outputs and must never print what it points to."""
    args = _pending(lambda w: {})(world)
    folder = world.box.scenarios / "sdk" / "pend"
    (folder / "session.1.jsonl").symlink_to(world.box.sentinel / "secret.txt")
    assert world.env is not None
    world.env.setattr(sys, "stdin", io.StringIO("s\n"))
    return ["review", *args[1:]]


def _no_sgr_or_bidi(world: World) -> None:
    text = world.out + world.err
    assert "\x1b[8m" not in text
    assert "\u202e" not in text
    assert "\\x1b[8m hidden" in text or "\\\\x1b[8m hidden" in text, text


def _refresh_discovery(world: World, link: Callable[[World], Path | str]) -> list[str]:
    sdk = world.box.scenarios / "sdk"
    sdk.mkdir(parents=True)
    (sdk / "linked").symlink_to(link(world))
    return ["refresh", str(world.box.scenarios), "--jobs", "1", "--timeout", "30"]


def _trickle(world: World) -> list[str]:
    """Recorded commands that each take less than --timeout but more than the run's budget in
    all: the agent always speaks again before a single wait ends (red team F8)."""
    calls = [tool_call("sleep 1.2; echo tick", f"call_{i}") for i in range(6)]
    log = session_log(*calls, said("done"))
    folder = world.box.scenario("trickle", {"session.jsonl": log})
    return [*_replay(folder)[:-2], "--timeout", "5", "--run-timeout", "3"]


def _wide_tree(world: World) -> list[str]:
    """A tree too large to walk within --timeout (2,000 folders, no scenario among them)."""
    wide = world.box.scenarios / "wide"
    for index in range(2000):
        (wide / f"d{index:04}").mkdir(parents=True)
    return ["replay", str(world.box.scenarios), "--jobs", "1", "--timeout", "0.001"]


def _root_link(world: World) -> list[str]:
    """The folder the user names (`snapshots`) is a link the pull request made, to another
    project's scenarios (red team F15)."""
    (world.box.scenarios / "snapshots").symlink_to(_outside_scenario(world).parent)
    return ["refresh", "snapshots", "--jobs", "1", "--timeout", "30"]


def _outside_scenario(world: World) -> Path:
    """A complete scenario folder outside the checkout (in the sentinel tree)."""
    folder = world.box.sentinel / "elsewhere"
    folder.mkdir()
    (folder / "input.json").write_text(json.dumps({"steps": [{"op": "initialize"}]}))
    (folder / "snapshot.yml").write_text(META)
    return folder


def _needs_upstream(world: World) -> Path:
    """A failing scenario dressed as an upstream folder with an op we do not drive."""
    folder = world.box.scenarios / "upstream" / "dressed"
    folder.mkdir(parents=True)
    steps = [{"op": "initialize"}, {"op": "newSession"}, {"op": "teleport"}]
    (folder / "input.json").write_text(json.dumps({"steps": steps}))
    (folder / "stdout.golden.jsonl").write_text('{"jsonrpc":"2.0","id":0,"result":{"x":1}}\n')
    (folder / "session.jsonl").write_text(session_log(said("wrong")))
    return folder


def _key_at_run_time(world: World) -> str:
    """A command printing the caller's key, though no file of the scenario holds it (the
    scan would refuse that): the key reversed, turned round by ``rev`` when the command runs.
    The sandbox hides every outside file, so this is how a key reaches a run's output."""
    return f"echo {world.box.key[::-1]} | rev"


def _pending_link(world: World) -> list[str]:
    """A failing replay whose ``.pending`` is a link out: its outputs must not land there."""
    folder = _bash_scenario(world, "echo changed")
    (folder / ".pending").symlink_to(world.box.sentinel / "dir")
    return _replay(folder)


def _dangling_meta(world: World) -> list[str]:
    folder = world.box.scenario("dangling", {"model.script.json": "[]"})
    (folder / "snapshot.yml").unlink()
    (folder / "snapshot.yml").symlink_to(world.box.sentinel / "planted.yml")
    return ["record", "--scripted", str(folder), "--timeout", "30"]


def _not_created(path: Path) -> None:
    assert not os.path.lexists(path), f"{path} was created through a link"


def _report_link(world: World) -> list[str]:
    folder = world.box.scenario("report")
    (world.box.scenarios / "build").symlink_to(world.box.sentinel / "dir")
    return _replay(folder, "--html-report", "build/report.html")


def _new_link(world: World) -> list[str]:
    (world.box.scenarios / "sdk-link").symlink_to(world.box.sentinel / "dir")
    return ["new", "fresh", "--dir", "sdk-link"]


def _huge_log(world: World) -> list[str]:
    folder = world.box.scenario("huge")
    with (folder / "session.jsonl").open("wb") as handle:
        handle.truncate(65 * 1024 * 1024)  # sparse: no disk, no time
    return ["show", str(folder)]


def _child_log(kind: str) -> Callable[[World], list[str]]:
    """Red team 4 F10: the needs check read every child log with a plain open, before the key
    scan and any deadline: a FIFO hung the gate, a sparse 1.5 GiB log took 4 GiB of memory."""

    def build(world: World) -> list[str]:
        folder = world.box.scenario("children", {"session.jsonl": session_log(said("ok"))})
        child = folder / "session.1.jsonl"
        if kind == "fifo":
            os.mkfifo(child)
        else:
            with child.open("wb") as handle:
                handle.truncate(65 * 1024 * 1024)  # sparse: no disk, no time
        return _replay(folder, "--timeout", "5")

    return build


def _report_written(world: World) -> None:
    report = world.box.scenarios / "report.html"
    assert report.is_file()
    assert "masked" in report.read_text()


def _ready_race(world: World) -> list[str]:
    """A recorded command swaps the folder a later hang's ``readyFile`` names for a link out,
    after the override was checked (the folder was real then): the marker must not follow."""
    command = f"mv d d.real && ln -s {world.box.sentinel / 'dir'} d && echo swapped"
    override = [
        {"kind": "chunks", "chunks": tool_call(command)},
        {"kind": "hang", "readyFile": "d/marker"},
    ]
    steps = [{"op": "initialize"}, {"op": "newSession"}, {"op": "promptAndCancel", "text": "go"}]
    folder = world.box.scenario(
        "ready-race",
        {
            "workspace/d/keep.txt": "x\n",
            "replay.override.json": json.dumps(override),
            "session.jsonl": session_log(said("x")),
        },
    )
    (folder / "input.json").write_text(json.dumps({"steps": steps}))
    return _replay(folder)


def _network_asked(world: World) -> list[str]:
    """A scripted record (the model is the scenario's own script) whose snapshot.yml asks for
    the network: its command tries a listener on the host's loopback."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    world.notes["listener"] = listener
    port = listener.getsockname()[1]
    command = f"(echo hi > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo REACHED || echo no"
    script = {"sessions": [[{"chunks": tool_call(command)}, {"chunks": said("done")}]]}
    folder = world.box.scenario("network", {"model.script.json": json.dumps(script)})
    (folder / "snapshot.yml").write_text(META + "bash_network: true\n")
    return ["record", "--scripted", str(folder), "--timeout", "30"]


def _listener_untouched(world: World) -> None:
    listener: socket.socket = world.notes["listener"]
    try:
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    log = (world.box.scenarios / "sdk" / "network" / "session.jsonl").read_text()
    results = [
        event["data"]["content"][0]["text"]
        for event in map(json.loads, log.splitlines())
        if event["type"] == "tool/result"
    ]
    assert results == ["no\n"]  # the command ran, and had no network


def _pinned_server_store(world: World) -> list[str]:
    folder = world.box.scenario("pinned")
    pinned = META.replace("store: jsonl", "store: postgres")
    (folder / "snapshot.yml").write_text(pinned)
    assert world.env is not None
    # Where a server would be, were the gate to go there: a socket directory of our own.
    world.env.setenv("DSH_POSTGRES_DSN", f"host={world.box.sentinel / 'dir'} dbname=x")
    return ["replay", str(folder), "--jobs", "1", "--timeout", "30"]


def _store_path(world: World) -> list[str]:
    """Red team 4 F13: ``store:`` became a path below ``.pending/`` and a failed replay's
    rmtree walked out of it, deleting the folder it named."""
    folder = world.box.scenario("store-path", {".pending/jsonl/keep": ""})
    out = os.path.relpath(world.box.sentinel / "dir", folder / ".pending")
    (folder / "snapshot.yml").write_text(META.replace("store: jsonl", f"store: {out}"))
    return ["replay", str(folder), "--jobs", "1", "--timeout", "30"]


def _checkout_read(world: World) -> list[str]:
    """A recorded command reads the checkout's .env and .git (the README keeps the key in
    .env; a CI checkout keeps its token in .git/config) and turns it round, past any
    redaction by key shape (red team F3)."""
    repo = world.repo()
    (repo / ".env").write_text(f"{_KEY}={world.box.outside_key}\n")
    (repo / ".git" / "config").write_text(f"[http]\n  extraheader = {world.box.outside_key}\n")
    command = f"cat {repo}/.env {repo}/.git/config | rev; echo read"
    return _replay(_bash_scenario(world, command))


def _checkout_unread(world: World) -> None:
    turned = world.box.outside_key[::-1].encode()
    assert turned not in (world.out + world.err).encode()
    for path in world.box.root.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.name not in (".env", "config"):
            assert turned not in path.read_bytes(), path


def _markup_profile(world: World) -> list[str]:
    folder = world.box.scenario("markup")
    (folder / "snapshot.yml").write_text(META.replace("profile: sdk", "profile: '[/red]evil'"))
    return ["list", str(folder)]


def _yaml_error(world: World) -> list[str]:
    folder = world.box.scenario("yaml")
    (folder / "snapshot.yml").write_text(META + f"extra: [\n  token: {world.box.key}\n")
    return _replay(folder)


# the default provider's variables, named through the registry (the vendor stays in its package)
_PREFIX = env_prefix(model_provider(DEFAULT_MODEL_PROVIDER))
_KEY = f"{_PREFIX}API_KEY"
# Where dsh-persistence-postgres is not installed (this package's own test environment), the
# pinned server store is refused as unknown instead: not reached either way.
_PINNED_SAYS = (
    ("pins the server store 'postgres'", "--store postgres", "not run")
    if "postgres" in store_backend_names()
    else ("unknown store backend 'postgres'",)
)


CASES = [
    # --- 3: where the key may go ---------------------------------------------------------------
    Case(
        "dotenv-tracked-base-url",
        _dotenv(True, lambda w: f"{_PREFIX}BASE_URL={w.notes['evil_url']}\n"),
        expect=(".env ignored: git tracks it", f"{_KEY} is sent to 127.0.0.1:"),
        check=_no_request_to_evil,
        cwd="scenarios",
    ),
    Case(
        "dotenv-untracked-base-url",
        _dotenv(False, lambda w: f"{_PREFIX}BASE_URL={w.notes['evil_url']}\nDSH_X=1\n"),
        expect=(f".env: only API keys are read from it; ignored {_PREFIX}BASE_URL, DSH_X",),
        check=_no_request_to_evil,
        cwd="scenarios",
    ),
    # --- 4: nothing from a scenario is trusted ------------------------------------------------
    Case(
        "pending-tracked-by-git",
        _pending(lambda w: {}, tracked=True),
        expect=(".pending ignored: git tracks it",),
        check=_unchanged_fixture,
    ),
    Case(
        "pending-path-climbs-out",
        _pending(lambda w: {"files": ["../../../../../sentinel/secret.txt"]}),
        expect=("pending.json", "field 'files.0'", "never another path"),
        check=_unchanged_fixture,
    ),
    Case(
        "pending-path-absolute",
        _pending(lambda w: {"files": [str(w.box.home / ".ssh" / "id_ed25519")]}),
        expect=("pending.json", "field 'files.0'"),
        check=_unchanged_fixture,
    ),
    Case(
        "pending-manifest-deep-json",
        _pending(lambda w: {"failures": "<deep>"}),
        expect=("pending.json", "unreadable pending outputs", "nested deeper"),
        check=_unchanged_fixture,
    ),
    Case(
        "pending-dir-a-link-out-on-failure",
        _pending_link,
        check=lambda w: None,
    ),
    Case(
        "discovery-never-enters-a-linked-dir",
        lambda w: _refresh_discovery(w, _outside_scenario),
        expect=("no scenarios",),
        code=1,
    ),
    Case(
        "discovery-self-loop-ends",
        lambda w: _refresh_discovery(w, lambda _w: ".."),
        expect=("no scenarios",),
        code=1,
    ),
    Case(
        "run-timeout-bounds-an-agent-that-keeps-speaking",
        _trickle,
        expect=("the run took longer than --run-timeout (default 3 x --timeout) while waiting",),
        code=1,
    ),
    Case(
        "discovery-of-a-huge-tree-ends-within-the-timeout",
        _wide_tree,
        expect=("discovery did not finish within --timeout 0.001 s",),
        code=2,
    ),
    Case(
        "discovery-root-named-through-a-link-is-refused",
        _root_link,
        expect=("snapshots: a symbolic link (to", "name the real folder"),
        code=2,
        cwd="scenarios",
    ),
    Case(
        "readyfile-folder-swapped-for-a-link-at-run-time",
        _ready_race,
        code=1,
        check=lambda w: _not_created(w.box.sentinel / "dir" / "marker"),
    ),
    Case(
        "snapshot-yml-a-link-to-credentials",
        _linked("snapshot.yml", lambda w: w.box.sentinel / "secret.txt"),
        expect=("snapshot.yml: cannot be read", "symlink"),
    ),
    Case(
        "snapshot-yml-dangling-link-in-record-scripted",
        _dangling_meta,
        expect=("snapshot.yml: cannot be read",),
        check=lambda w: _not_created(w.box.sentinel / "planted.yml"),
    ),
    Case(
        "input-json-a-link-to-home",
        _linked("input.json", lambda w: w.box.home / ".ssh" / "id_ed25519"),
        expect=("input.json: cannot be read", "symlink"),
    ),
    Case(
        "report-through-a-linked-build-dir",
        _report_link,
        expect=("HTML report not written", "scenarios/build: a symlink"),
        code=2,
        cwd="scenarios",
    ),
    Case(
        "new-through-a-linked-profile-dir",
        _new_link,
        expect=("symlink",),
        code=2,
        cwd="scenarios",
    ),
    Case(
        "show-a-sparse-huge-log-is-capped",
        _huge_log,
        expect=("session.jsonl", "larger than the 67108864-byte limit"),
        code=2,
    ),
    # --- 5: key bytes in artefacts, control characters, markup -------------------------------
    Case(
        "failure-text-base64-of-an-outside-key",
        lambda w: _replay(_bash_scenario(w, f"{_key_at_run_time(w)} | base64 -w0")),
        expect=("masked",),
        code=1,
    ),
    Case(
        "failure-text-hex-of-an-outside-key",
        lambda w: _replay(_bash_scenario(w, f"{_key_at_run_time(w)} | od -An -tx1 | tr -d ' \\n'")),
        expect=("masked",),
        code=1,
    ),
    Case(
        "failure-text-percent-encoded-key",
        lambda w: _replay(
            # The key file as %XX bytes (percent-encoding of every byte).
            _bash_scenario(w, f"{_key_at_run_time(w)} | od -An -tx1 | tr ' ' '%' | tr -d '\\n'")
        ),
        expect=("masked",),
        code=1,
    ),
    Case(
        "html-report-holds-no-key",
        lambda w: _replay(
            _bash_scenario(
                w,
                f"{_key_at_run_time(w)} | base64 -w0; {_key_at_run_time(w)}",
            ),
            "--html-report",
            str(w.box.scenarios / "report.html"),
        ),
        code=1,
        check=_report_written,
    ),
    Case(
        "terminal-escapes-from-a-command-are-inert",
        lambda w: _replay(_bash_scenario(w, "printf '\\033]0;pwned\\007\\033[2J'")),
        code=1,
        check=_no_raw_escape,
    ),
    Case(
        "pending-review-of-a-linked-committed-child",
        _review_linked_child,
        expect=("session.1.jsonl", "symlink"),
    ),
    Case(
        "terminal-sgr-and-bidi-from-a-command-are-inert",
        _review_planted,
        check=_no_sgr_or_bidi,
    ),
    Case(
        "markup-in-profile-is-text",
        _markup_profile,
        expect=("[/red]evil",),
    ),
    Case(
        "launcher-base-url-env-path-is-refused",
        _meta("agent: ['{python}', x.py]\nagent_base_url_env: PATH\n", "foreign"),
        expect=("snapshot.yml", "agent_base_url_env", "not a base-URL variable"),
        code=2,
    ),
    Case(
        "launcher-base-url-env-ld-library-path-is-refused",
        _meta("agent: ['{python}', x.py]\nagent_base_url_env: LD_LIBRARY_PATH\n", "foreign"),
        expect=("snapshot.yml", "agent_base_url_env", "not a base-URL variable"),
        code=2,
    ),
    Case(
        "network-asked-by-a-scenario-is-not-given-in-scripted-record",
        _network_asked,
        code=0,
        check=_listener_untouched,
    ),
    Case(
        "store-a-server-pinned-by-a-scenario-is-not-reached",
        _pinned_server_store,
        expect=_PINNED_SAYS,
        code=1,
    ),
    Case(
        "store-name-from-snapshot-yml-is-never-a-path",
        _store_path,
        expect=("snapshot.yml", "field 'store'"),
        code=2,
    ),
    Case(
        "checkout-env-and-git-are-hidden-from-commands",
        _checkout_read,
        code=1,
        check=_checkout_unread,
    ),
    Case(
        "yaml-error-never-quotes-the-line",
        _yaml_error,
        expect=("snapshot.yml", "invalid YAML at line 7"),
        code=2,
    ),
    # --- 6: bounded work --------------------------------------------------------------------
    Case(
        "deep-json-in-input",
        _deep("input.json", lambda deep: deep),
        expect=("input.json", "nested deeper than 200"),
        code=2,
    ),
    Case(
        "deep-json-in-a-session-log",
        _deep(
            "session.jsonl",
            lambda deep: (
                '{"type":"session","version":0,"id":"s","createdAt":1}\n'
                + '{"type":"x","data":'
                + deep
                + "}\n"
            ),
        ),
        expect=("session.jsonl", "nested deeper than 200"),
        code=1,
    ),
    Case(
        "expect-regex-with-a-back-reference",
        _meta("expect:\n  - prompt: 1\n    message: '(a)\\1'\n"),
        expect=("snapshot.yml", "'expect.0.message'", "RE2"),
        code=2,
    ),
    Case(
        "expect-regex-exponential-for-backtracking",
        _meta("expect:\n  - prompt: 1\n    message: '^(a+)+$'\n"),
        code=1,
    ),
    Case(
        "key-scan-of-a-crafted-375-kib-line",
        lambda w: _replay(
            w.box.scenario("crafted", {"workspace/crafted.txt": "-sk" * (375 * 1024 // 3)})
        ),
        code=1,
    ),
    Case(
        "key-scan-past-the-timeout-stops-the-run",
        lambda w: [
            *_replay(
                w.box.scenario("many", {f"workspace/f{i}.txt": f"{i}\n" * 2000 for i in range(300)})
            )[:-2],
            "--timeout",
            "0.001",
        ],
        expect=("the key scan did not finish within --timeout 0.001 s",),
        code=1,
    ),
    Case(
        "needs-check-never-opens-a-fifo-child-log",
        _child_log("fifo"),
        expect=("session.1.jsonl: not a regular file",),
        code=1,
    ),
    Case(
        "needs-check-caps-a-child-log",
        _child_log("huge"),
        expect=("session.1.jsonl: larger than",),
        code=1,
    ),
    # --- 7: one verdict -----------------------------------------------------------------------
    Case(
        "needs-from-a-dressed-upstream-folder-fails-the-cli",
        lambda w: _replay(_needs_upstream(w)),
        expect=("NEEDS", "needs op teleport"),
        code=1,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_untrusted_input_stays_out(
    case: Case, world: World, capfd: pytest.CaptureFixture[str]
) -> None:
    _run(world, case, capfd)


def test_the_catalogue_covers_every_class() -> None:
    names = {c.name for c in CASES}
    for prefix in (
        "dotenv",
        "pending",
        "discovery",
        "run-timeout",
        "readyfile",
        "launcher",
        "network",
        "checkout",
        "store",
        "snapshot-yml",
        "report",
        "show",
        "failure",
        "html",
        "terminal",
        "markup",
        "yaml",
        "deep",
        "expect",
        "key-scan",
        "needs",
    ):
        assert any(n.startswith(prefix) for n in names), prefix


# --- the pytest plugin: the same verdict, sharded or not -----------------------------------------


@pytest.mark.parametrize("shard", [(), ("-n", "2")], ids=["plain", "xdist"])
def test_needs_is_never_a_pass_in_the_pytest_plugin(
    tmp_path: Path,
    inner_pytest: Callable[..., subprocess.CompletedProcess[str]],
    shard: tuple[str, ...],
) -> None:
    box = Sandbox.create(tmp_path)
    folder = _needs_upstream(World(box, ""))
    run = inner_pytest(box.scenarios, "--dsh-snapshots", str(folder.parent.parent), "-q", *shard)
    assert run.returncode == 1, run.stdout
    assert re.search(r"\b\d+ failed", run.stdout), run.stdout
    assert "skipped" not in run.stdout
    assert not re.search(r"\b[1-9][0-9]* passed", run.stdout), run.stdout
    assert "needs op teleport" in run.stdout
    assert "\x1b]" not in run.stdout


def test_a_pytest_failure_is_redacted_on_decoded_forms(
    tmp_path: Path,
    inner_pytest: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    box = Sandbox.create(tmp_path)
    world = World(box, "")
    _bash_scenario(world, f"{_key_at_run_time(world)} | base64 -w0")
    live_key = model_provider(DEFAULT_MODEL_PROVIDER).secret_env_names[0]
    env = {**os.environ, "HOME": str(box.home), live_key: box.key}
    run = inner_pytest(box.scenarios, "--dsh-snapshots", str(box.scenarios), "-q", env=env)
    assert run.returncode == 1, run.stdout
    assert box.leaks(run.stdout.encode()) == []
    assert box.leaks(run.stderr.encode()) == []
    assert "masked" in run.stdout


def _plugin_run(
    tmp_path: Path,
    inner_pytest: Callable[..., subprocess.CompletedProcess[str]],
    plant: Callable[[Sandbox, Path], None],
) -> tuple[Sandbox, subprocess.CompletedProcess[str]]:
    """The pytest front end over a tree holding one failing scenario, planted first."""
    box = Sandbox.create(tmp_path)
    plant(box, _bash_scenario(World(box, ""), "echo hi"))
    return box, inner_pytest(box.scenarios, "--dsh-snapshots", str(box.scenarios), "-q")


def _conftests(box: Sandbox, folder: Path) -> None:
    for where in (box.scenarios, folder.parent, folder):
        mark = box.sentinel / "conftest-ran"
        (where / "conftest.py").write_text(f"open({str(mark)!r}, 'a').write('ran')\n")


def test_a_conftest_in_the_scenario_tree_is_never_imported(
    tmp_path: Path,
    inner_pytest: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    # pytest imports every conftest.py of the folders it collects, in the gate's own process
    # (red team F9): one at the top of the tree and one in a scenario folder, each of which
    # would leave a mark.
    box, run = _plugin_run(tmp_path, inner_pytest, _conftests)
    mark = box.sentinel / "conftest-ran"
    assert "conftest" not in run.stderr, run.stderr
    assert re.search(r"\b1 failed\b", run.stdout), run.stdout  # collected and run all the same
    assert not mark.exists(), "a conftest.py of the scenario tree ran in the gate"


def test_a_pytest_ini_in_the_scenario_tree_is_refused(tmp_path: Path) -> None:
    # pytest looks for its configuration from the common folder of its arguments upwards: a
    # pull request's snapshots/pytest.ini would win over the project's (red team F13), with an
    # addopts that deselects the failing scenario.
    box = Sandbox.create(tmp_path)
    folder = _bash_scenario(World(box, ""), "echo hi")
    (box.scenarios / "pytest.ini").write_text('[pytest]\naddopts = -k "not bash"\n')
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--dsh-snapshots",
         str(box.scenarios)],
        cwd=box.root,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 4, run.stdout + run.stderr  # a usage error, nothing ran
    assert f"from {box.scenarios / 'pytest.ini'}" in run.stderr
    assert "name the project's own with -c" in run.stderr
    assert folder.is_dir()


def test_pytest_item_names_from_a_profile_are_inert(
    tmp_path: Path,
    inner_pytest: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    # pytest prints node ids raw: a profile of snapshot.yml would retitle and clear the
    # terminal, recolour and reverse the log (red team F12).
    hostile = r"sdk\e]0;PWNED\a\e[2J\e[31m\u202e"  # YAML's escapes: ESC, BEL, RLO

    def profile(_box: Sandbox, folder: Path) -> None:
        (folder / "snapshot.yml").write_text(META.replace("profile: sdk", f'profile: "{hostile}"'))

    _, run = _plugin_run(tmp_path, inner_pytest, profile)
    assert re.search(r"\b1 failed\b", run.stdout), run.stdout
    for active in ("\x1b", "\x07", "\u202e"):
        assert active not in run.stdout + run.stderr, repr(active)
    assert "\\x1b]0;PWNED" in run.stdout


def test_the_pytest_plugins_discovery_is_bounded_as_the_clis(
    tmp_path: Path,
    inner_pytest: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """Red team 4 F12: a tree of many folders beside a scenario stopped the CLI at its
    --timeout but was walked to the end by the plugin, whose scenario then passed."""
    box = Sandbox.create(tmp_path)
    _bash_scenario(World(box, ""), "echo hi")
    for index in range(3000):
        (box.scenarios / "filler" / f"d{index}").mkdir(parents=True)
    run = inner_pytest(
        box.scenarios, "--collect-only", "--dsh-timeout", "0.001",
        "--dsh-snapshots", str(box.scenarios),
    )  # fmt: skip
    assert run.returncode != 0, run.stdout + run.stderr
    assert "discovery did not finish within --dsh-timeout 0.001 s" in run.stdout + run.stderr

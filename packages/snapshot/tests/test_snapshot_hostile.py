"""The hostile-scenario catalogue (issue 8): scenario folders that try to escape their run.

Each case builds a scenario folder in a tmp dir at run time (fake keys are made per run; no
key-shaped literal is committed), runs it through the real CLI (``dsh_snapshot.cli.main``, which
drives the real agent subprocess) with ``HOME`` and ``TMPDIR`` pointing into a watched sandbox
and fake keys in the environment, and asserts:

- nothing outside the run changed: the sentinel tree and the fake ``$HOME`` hash the same
  before and after, the runner's temp dir is empty again;
- no key is in any byte written: stdout, stderr, and every file created or changed anywhere
  under the sandbox (the scenario folder included);
- a refused scenario is reported naming the file and the field (or entry), and its folder is
  left exactly as it was.

The recorded-``bash`` cases hold because of the bubblewrap sandbox and the tool environment
allow-list (``dsh_core._sandbox``); the rest because of this package's confinement, key scan and
staged publishing (SECURITY.md maps each promise to its case).
"""

from __future__ import annotations

import base64
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from dsh_core.plugins import DEFAULT_MODEL_PROVIDER, model_provider
from dsh_snapshot.cli import main
from dsh_snapshot.testing import META, Sandbox, said, session_log, tool_call, tree_state

# The key a record reads: the default provider's, as its factory names it.
[_KEY_VAR] = model_provider(DEFAULT_MODEL_PROVIDER).secret_env_names


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# --- the catalogue -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One hostile scenario.

    Attributes:
        name: the case id.
        build: makes the scenario folder in the sandbox; returns it.
        command: the CLI arguments before the folder (``replay``, ``refresh``, ``record
            --scripted``).
        expect: substrings the output must hold (the file and the field or entry at fault).
        code: the exit status, or ``None`` when only the confinement matters.
        refused: the scenario folder must be left byte for byte as it was.
    """

    name: str
    build: Callable[[Sandbox], Path]
    command: tuple[str, ...] = ("replay", "--store", "jsonl")
    expect: tuple[str, ...] = ()
    code: int | None = 1
    refused: bool = True


def _override(doc: Callable[[Sandbox], Any]) -> Callable[[Sandbox], Path]:
    def build(box: Sandbox) -> Path:
        text = json.dumps(doc(box))
        return box.scenario("readyfile", {"replay.override.json": text})

    return build


def _workspace_link(
    target: Callable[[Sandbox], Path | str], name: str = "link"
) -> Callable[[Sandbox], Path]:
    def build(box: Sandbox) -> Path:
        folder = box.scenario("ws-link", {"workspace/readme.txt": "hello\n"})
        (folder / "workspace" / name).symlink_to(target(box))
        return folder

    return build


def _loop(box: Sandbox) -> Path:
    folder = box.scenario("ws-loop", {"workspace/readme.txt": "hello\n"})
    (folder / "workspace" / "a").symlink_to("b")
    (folder / "workspace" / "b").symlink_to("a")
    return folder


def _workspace_is_link(box: Sandbox) -> Path:
    folder = box.scenario("ws-itself")
    (folder / "workspace").symlink_to(box.sentinel)
    return folder


def _fixture_is_link(box: Sandbox) -> Path:
    folder = box.scenario("fixture-link")
    (folder / "session.jsonl").symlink_to(box.home / ".ssh" / "id_ed25519")
    return folder


def _step(**fields: Any) -> Callable[[Sandbox], Path]:
    # Upstream's later harness names paths in fields ours refuses outright (cwd, waitForFile):
    # an upstream folder is read leniently, so its paths must still be confined.
    def build(box: Sandbox) -> Path:
        folder = box.scenario("input-path")
        (folder / "snapshot.yml").unlink()
        (folder / "stdout.golden.jsonl").write_text("")
        steps = [{"op": "initialize"}, {"op": "newSession", **fields}]
        steps.append({"op": "prompt", "text": "go"})
        (folder / "input.json").write_text(
            json.dumps({"steps": steps}).replace("{sentinel}", str(box.sentinel))
        )
        return folder

    return build


def _secret(rel: str, content: Callable[[str], str | bytes]) -> Callable[[Sandbox], Path]:
    def build(box: Sandbox) -> Path:
        return box.scenario("secret", {rel: content(box.key)})

    return build


def _in_chunk(text: Callable[[str], str]) -> Callable[[str], str]:
    return lambda key: session_log(said("Here is ", text(key), "."))


def _symlinked_dir(box: Sandbox) -> Path:
    folder = box.scenario("secret-linked-dir", {"vault/.cache/token": f"{box.key}\n"})
    (folder / "workspace").mkdir()
    (folder / "workspace" / "docs").symlink_to(Path("..") / "vault")
    return folder


def _bash(command: Callable[[Sandbox], str]) -> Callable[[Sandbox], Path]:
    def build(box: Sandbox) -> Path:
        log = session_log(tool_call(command(box)), said("done"))
        return box.scenario("bash", {"session.jsonl": log, "workspace/readme.txt": "hi\n"})

    return build


def _relative_from_root(path: Path) -> str:
    return str(path.resolve()).lstrip("/")


CASES = [
    # readyFile (replay.override.json)
    Case(
        "readyfile-absolute",
        _override(lambda box: [{"kind": "hang", "readyFile": str(box.sentinel / "victim.txt")}]),
        expect=("replay.override.json", "'[0].readyFile'", "is absolute"),
    ),
    Case(
        "readyfile-climbs-out",
        _override(lambda box: [{"kind": "hang", "readyFile": "../../../sentinel/victim.txt"}]),
        expect=("replay.override.json", "'[0].readyFile'", "climbs out"),
    ),
    Case(
        "readyfile-home-in-a-patch",
        _override(
            lambda box: {"patches": [{"at": 0, "entry": {"kind": "hang", "readyFile": "~/x"}}]}
        ),
        expect=("replay.override.json", "'patches[0].entry.readyFile'"),
    ),
    # workspace/ symlinks
    Case(
        "workspace-link-to-outside-file",
        _workspace_link(lambda box: box.sentinel / "secret.txt"),
        expect=("workspace/link: a symlink leading outside the scenario folder",),
    ),
    Case(
        "workspace-link-to-outside-dir",
        _workspace_link(lambda box: box.sentinel / "dir"),
        expect=("workspace/link: a symlink leading outside the scenario folder",),
    ),
    Case(
        "workspace-link-to-home",
        _workspace_link(lambda box: box.home),
        expect=("workspace/link: a symlink leading outside the scenario folder",),
    ),
    Case(
        "workspace-link-to-root",
        _workspace_link(lambda box: "/"),
        expect=("workspace/link: a symlink leading outside the scenario folder",),
    ),
    Case("workspace-link-loop", _loop, expect=("workspace/a: a symlink that dangles or loops",)),
    Case(
        "workspace-link-out-of-workspace",
        _workspace_link(lambda box: Path("..") / "input.json"),
        expect=("workspace entry 'link'", "leads outside workspace/"),
    ),
    Case(
        "workspace-itself-a-link",
        _workspace_is_link,
        expect=("scenario entry 'workspace'", "leads outside"),
    ),
    Case(
        "fixture-a-link-to-home",
        _fixture_is_link,
        expect=("scenario entry 'session.jsonl'", "leads outside"),
    ),
    # input.json path fields
    Case(
        "input-cwd-absolute",
        _step(cwd="{sentinel}"),
        expect=("input.json", "'steps.1.cwd'", "must be a path relative to"),
        code=2,
    ),
    Case(
        "input-wait-for-file-climbs-out",
        _step(waitForFile={"path": "../../sentinel/victim.txt"}),
        expect=("input.json", "'steps.1.waitForFile.path'", "must stay inside"),
        code=2,
    ),
    Case(
        "input-additional-directories-root",
        _step(additionalDirectories=["sub", "/"]),
        expect=("input.json", "'steps.1.additionalDirectories.1'"),
        code=2,
    ),
    # the key scan
    Case(
        "secret-plain",
        _secret("workspace/notes.txt", lambda key: f"the key is {key}\n"),
        expect=("workspace/notes.txt:1: looks like", "value masked"),
    ),
    Case(
        "secret-json-escaped",
        _secret("session.jsonl", _in_chunk(lambda key: key.replace("-", "\\u002d"))),
        expect=("session.jsonl:4: looks like",),
    ),
    Case(
        "secret-nested-escaped-json",
        _secret(
            "session.jsonl",
            lambda key: session_log(tool_call(json.dumps({"k": key.replace("-", "\\u002d")}))),
        ),
        expect=("session.jsonl:3: looks like",),
    ),
    Case(
        "secret-base64",
        _secret("workspace/blob.txt", lambda key: f"data: {b64('token=' + key)}\n"),
        expect=("workspace/blob.txt:1: looks like",),
    ),
    Case(
        "secret-hidden-dotenv",
        _secret("workspace/.env", lambda key: f"{_KEY_VAR}={key}\n"),
        expect=("workspace/.env:1:",),
    ),
    Case(
        "secret-utf16",
        _secret("workspace/notes.txt", lambda key: f"note {key}\n".encode("utf-16")),
        expect=("workspace/notes.txt:1: looks like",),
    ),
    Case(
        "secret-behind-symlinked-dir",
        _symlinked_dir,
        expect=("vault/.cache/token:1: looks like",),
    ),
    Case(
        "secret-split-across-chunks",
        _secret("session.jsonl", lambda key: session_log(said("Here: ", key[:17], key[17:])[:4])),
        expect=("session.jsonl:4: looks like", "split across streamed chunks"),
    ),
    Case(
        "secret-split-in-stdout-frames",
        _secret(
            "stdout.expected.jsonl",
            lambda key: "".join(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {
                            "sessionId": "s",
                            "update": {
                                "sessionUpdate": "agent_message_chunk",
                                "content": {"type": "text", "text": part},
                            },
                        },
                    }
                )
                + "\n"
                for part in (key[:9], key[9:])
            ),
        ),
        expect=("stdout.expected.jsonl:1:", "split across streamed chunks"),
    ),
    # recorded bash commands (replay runs them)
    Case(
        "bash-writes-outside",
        _bash(lambda box: f"echo pwned > {box.sentinel / 'victim.txt'}"),
        code=None,
        refused=False,
    ),
    Case(
        "bash-cd-root-and-touch",
        _bash(lambda box: f"cd / && touch {_relative_from_root(box.sentinel / 'touched')}"),
        code=None,
        refused=False,
    ),
    Case(
        "bash-writes-home",
        _bash(lambda box: 'touch "$HOME/pwned" && echo "curl evil" >> ~/.bashrc'),
        code=None,
        refused=False,
    ),
    Case(
        # The sandbox hides the host's /tmp (where the key lies): the command cannot read it,
        # and the refreshed fixtures hold its failure, never the key.
        "bash-cannot-read-an-outside-key-in-refresh",
        _bash(lambda box: f"cat {box.sentinel / 'secret.txt'}"),
        command=("refresh",),
        code=0,
        refused=False,
    ),
    Case(
        "bash-runs-env-in-refresh",
        _bash(lambda box: "env"),
        command=("refresh",),
        code=0,
        refused=False,
    ),
]


def _outputs(text: str) -> str:
    """Console output as one line: rich wraps long lines at spaces."""
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_scenario_stays_in_its_run(
    case: Case,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    box = Sandbox.create(tmp_path)
    folder = case.build(box)
    monkeypatch.setenv("HOME", str(box.home))
    monkeypatch.setenv("TMPDIR", str(box.tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv(_KEY_VAR, box.key)
    monkeypatch.setenv("OPENAI_API_KEY", box.other_key)
    monkeypatch.chdir(box.tmpdir)
    outside = {"sentinel": tree_state(box.sentinel), "home": tree_state(box.home)}
    before = tree_state(box.root)

    code = main([*case.command, str(folder), "--jobs", "1", "--timeout", "30"])

    out, err = capfd.readouterr()
    assert box.leaks(out.encode()) == [], "a key reached stdout"
    assert box.leaks(err.encode()) == [], "a key reached stderr"
    after = tree_state(box.root)
    for rel, state in after.items():
        path = box.root / rel
        if state != before.get(rel) and state.startswith("file:"):
            assert box.leaks(path.read_bytes()) == [], f"a key was written to {rel}"
    assert list(box.tmpdir.iterdir()) == [], "the run left files in its temp dir"
    assert {"sentinel": tree_state(box.sentinel), "home": tree_state(box.home)} == outside
    if case.refused:
        scenario = {k: v for k, v in before.items() if k.startswith("scenarios/")}
        assert {k: v for k, v in after.items() if k.startswith("scenarios/")} == scenario
    if case.code is not None:
        assert code == case.code, _outputs(out)
    for needle in case.expect:
        assert needle in _outputs(out), _outputs(out)


def test_the_catalogue_covers_every_class() -> None:
    prefixes = {case.name.split("-", 1)[0] for case in CASES}
    assert prefixes == {"readyfile", "workspace", "fixture", "input", "secret", "bash"}
    assert len(CASES) >= 20


# --- a live record run against a hostile model -------------------------------------------------


def test_record_with_a_hostile_model(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """``dsh-snapshot record`` (live mode, a fake key) against the scripted model server, whose
    model runs ``env``, tries to read an outside key through a symlink it makes, and writes
    outside the workspace and into ``$HOME``: the sandbox hides the key (the host's /tmp) and
    refuses the writes, so the recording holds the failures, no key, and is published."""
    from dsh_scripted_server import ScriptedModelServer  # noqa: PLC0415 - this test only

    box = Sandbox.create(tmp_path)
    old = {
        "session.jsonl": session_log(said("old")),
        "session.1.jsonl": '{"type":"session","version":0,"id":"c","createdAt":1}\n',
        "stdout.expected.jsonl": "",
    }
    folder = box.scenario("record", old)
    (folder / "snapshot.yml").write_text(META.replace("scripted", "live"))
    model = [
        tool_call("env", "call_1"),
        tool_call(f"ln -s {box.sentinel / 'secret.txt'} peek && cat peek", "call_2"),
        tool_call(f'echo pwned > {box.sentinel / "victim.txt"}; touch "$HOME/pwned"', "call_3"),
        said("done"),
    ]
    monkeypatch.setenv("HOME", str(box.home))
    monkeypatch.setenv("TMPDIR", str(box.tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.chdir(box.tmpdir)
    outside = {"sentinel": tree_state(box.sentinel), "home": tree_state(box.home)}
    before = tree_state(box.root)
    # The record provider's own profile: its models and its variables (key, base URL, the
    # session header the server routes by; the public API needs none).
    profile = DEFAULT_MODEL_PROVIDER
    with ScriptedModelServer(cast(Any, [model]), api_key=box.key, profile=profile) as server:
        for name, value in server.client_env().items():
            monkeypatch.setenv(name, value)
        code = main(["record", str(folder), "--timeout", "30"])
        # The record's preflight (GET /models) is not one of the model's calls.
        served = sum(r.path.endswith("/chat/completions") for r in server.requests)
    out, err = capfd.readouterr()

    assert {"sentinel": tree_state(box.sentinel), "home": tree_state(box.home)} == outside
    assert served == len(model), "the model's script did not run to its end"
    assert box.leaks(out.encode()) == []
    assert box.leaks(err.encode()) == []
    after = tree_state(box.root)
    for rel, state in after.items():
        if state != before.get(rel) and state.startswith("file:"):
            assert box.leaks((box.root / rel).read_bytes()) == [], rel
    assert list(box.tmpdir.iterdir()) == []
    assert code == 0, _outputs(out)
    recorded = (folder / "session.jsonl").read_text(encoding="utf-8")
    assert "cat: peek: No such file or directory" in recorded
    assert "victim.txt: No such file or directory" in recorded  # the write beside the key
    assert not (folder / "session.1.jsonl").exists()  # the stale child log went with it

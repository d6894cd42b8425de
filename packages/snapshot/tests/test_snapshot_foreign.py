"""Any ACP agent in the gate: ``agent:`` scenarios run through ``dsh-llm-proxy``.

The agent is one we did not write: agent-client-protocol's example agent, extended with one
``openai`` SDK call (``snapshots/foreign/acp-example/agent.py``). It is recorded through the gate
against the scripted model server, then replayed with that server gone.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import SecretStr

from dsh_core import Chunk, ToolSandbox
from dsh_core.plugins import DEFAULT_MODEL_PROVIDER, default_store_backend_names, secret_env_names
from dsh_scripted_server import ScriptedModelServer, resolve_profile
from dsh_snapshot import ScenarioError, SnapshotSettings, load_scenario, run_scenario
from dsh_snapshot._foreign import ForeignAgent, foreign_agent, private_paths
from dsh_snapshot.cli import main

# The provider a live recording forwards to (the default); its variables named by its settings.
_LIVE = resolve_profile(DEFAULT_MODEL_PROVIDER)

requires_sandbox = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the agent sandbox is bubblewrap (Linux)"
)

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "snapshots" / "foreign" / "acp-example"
FIXTURES = ("session.jsonl", "stdout.expected.jsonl")
META = """\
version: 1
profile: foreign
recording: scripted
"""


def _scenario(folder: Path, meta: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "snapshot.yml").write_text(meta, encoding="utf-8")
    (folder / "input.json").write_text(
        json.dumps({"steps": [{"op": "initialize"}, {"op": "newSession"}]}), encoding="utf-8"
    )
    return folder


def _answer(text: str) -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def _unrecorded_copy(tmp_path: Path) -> Path:
    """The committed scenario without its recorded fixtures."""
    if not (EXAMPLE / "input.json").is_file():
        pytest.skip(f"{EXAMPLE} is not committed")
    folder = Path(shutil.copytree(EXAMPLE, tmp_path / "foreign" / "acp-example"))
    for name in FIXTURES:
        (folder / name).unlink(missing_ok=True)
    return folder


# --- snapshot.yml -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "field", "message"),
    [
        ("agent: []\n", "agent", "at least 1 item"),
        ("agent: python agent.py\n", "agent", "valid list"),
        ("agent: ['']\n", "agent.0", "at least 1 character"),
        ("agent: [3]\n", "agent.0", "valid string"),
        ("agent: ['  ', x]\n", "agent", "first item (the program) must not be blank"),
        ("agent: ['{py}', x]\n", "agent.0", "unknown placeholder {py}"),
        ("agent: ['{python}', '{scenario}/{name}.py']\n", "agent.1", "unknown placeholder {name}"),
        ("agent: [x]\nagent_base_url_env: 1BASE\n", "agent_base_url_env", "should match"),
        ("agent: [x]\nagent_base_url_env: [A]\n", "agent_base_url_env", "valid string"),
        # The gate sets it to the proxy's URL: in PATH or LD_LIBRARY_PATH its first part
        # (`http`) is a folder of the run's cwd, the scenario's workspace (red team F1).
        ("agent: [x]\nagent_base_url_env: PATH\n", "agent_base_url_env", "not a base-URL"),
        ("agent: [x]\nagent_base_url_env: LD_LIBRARY_PATH\n", "agent_base_url_env", "base-URL"),
        ("agent: [x]\nagent_base_url_env: PYTHONPATH\n", "agent_base_url_env", "base-URL"),
        ("agent: [x]\nagent_base_url_env: BASH_ENV\n", "agent_base_url_env", "base-URL"),
        ("agent: [x]\nagent_base_url_env: SOME_NAME\n", "agent_base_url_env", "base-URL"),
        ("agent_base_url_env: URL\n", "agent_base_url_env", "agent_base_url_env is set but agent"),
        ("agent_env: {A: b}\n", "agent_env", "agent_env is set but agent is not"),
        ("agent: [x]\nagent_env: {OPENAI_BASE_URL: u}\n", "agent_env", "sets OPENAI_BASE_URL"),
        (
            "agent: [x]\nagent_base_url_env: MY_URL\nagent_env: {MY_URL: u}\n",
            "agent_env",
            "agent_env sets MY_URL",
        ),
        ("agent: [x]\nagent_env: {'BAD-NAME': v}\n", "agent_env.BAD-NAME.[key]", "should match"),
        ("agent: [x]\nagent_env: {A: 1}\n", "agent_env.A", "valid string"),
        ("agent: [x]\nagent_env: [A]\n", "agent_env", "valid dictionary"),
        ("agent: [x]\nagent_cmd: [y]\n", "agent_cmd", "Extra inputs are not permitted"),
        ("agent: [x]\nagent_env: {LD_PRELOAD: ./evil.so}\n", "agent_env", "sets LD_PRELOAD"),
        ("agent: [x]\nagent_env: {ld_audit: x}\n", "agent_env", "sets ld_audit"),
        ("agent: [x]\nagent_env: {NODE_OPTIONS: -r x}\n", "agent_env", "sets NODE_OPTIONS"),
        ("agent: [x]\nagent_env: {PYTHONSTARTUP: x}\n", "agent_env", "sets PYTHONSTARTUP"),
        ("agent: [x]\nagent_env: {PYTHONPATH: .}\n", "agent_env", "sets PYTHONPATH"),
        ("agent: [x]\nagent_env: {PYTHONHOME: .}\n", "agent_env", "sets PYTHONHOME"),
        ("agent: [x]\nagent_env: {BASH_ENV: x}\n", "agent_env", "sets BASH_ENV"),
        ("agent: [x]\nagent_env: {ENV: x}\n", "agent_env", "sets ENV"),
        ("agent: [x]\nagent_env: {PROMPT_COMMAND: x}\n", "agent_env", "sets PROMPT_COMMAND"),
        ("agent: [x]\nagent_env: {GIT_CONFIG_GLOBAL: x}\n", "agent_env", "sets GIT_CONFIG"),
        ("agent: [x]\nagent_env: {GIT_SSH_COMMAND: x}\n", "agent_env", "sets GIT_SSH_COMMAND"),
        ("agent: [x]\nagent_env: {PATH: ./bin}\n", "agent_env", "sets PATH"),
        ("agent: [x]\nagent_env: {HTTPS_PROXY: h}\n", "agent_env", "sets HTTPS_PROXY"),
        ("agent: [x]\nagent_env: {PERL5OPT: x}\n", "agent_env", "sets PERL5OPT"),
        ("agent: [x]\nagent_env: {JAVA_TOOL_OPTIONS: x}\n", "agent_env", "sets JAVA_TOOL_OPT"),
        ("bash_network: maybe\n", "bash_network", "valid boolean"),
    ],
)
def test_bad_agent_fields_name_the_file_and_field(
    tmp_path: Path, lines: str, field: str, message: str
) -> None:
    folder = _scenario(tmp_path / "foreign" / "x", META + lines)
    with pytest.raises(ScenarioError) as info:
        load_scenario(folder)
    assert info.value.path == folder / "snapshot.yml"
    assert info.value.field == field
    assert message in info.value.reason


def test_agent_fields_are_read(tmp_path: Path) -> None:
    meta = META + textwrap.dedent("""\
        agent: ["{python}", "{scenario}/agent.py", --flag]
        agent_base_url_env: MY_BASE_URL
        agent_env: {MY_KEY: dummy}
        """)
    # The harmless Python switches pass.
    unbuffered = META + "agent: [x]\nagent_env: {PYTHONUNBUFFERED: '1', PYTHONUTF8: '1'}\n"
    load_scenario(_scenario(tmp_path / "foreign" / "py", unbuffered))
    scenario = load_scenario(_scenario(tmp_path / "foreign" / "x", meta))
    agent = foreign_agent(scenario)
    assert agent is not None
    assert agent == ForeignAgent(
        ("{python}", "{scenario}/agent.py", "--flag"), "MY_BASE_URL", {"MY_KEY": "dummy"}
    )
    argv = agent.argv(scenario.path)
    assert argv[1:] == [f"{scenario.path}/agent.py", "--flag"]
    assert Path(argv[0]).name.startswith("python")
    # The CLI's --agent wins over snapshot.yml; a scenario without agent: runs ours.
    other = ForeignAgent(("other",))
    chosen = foreign_agent(scenario, other)
    assert chosen is not None
    assert chosen.command == other.command  # --agent replaces the command, keeps agent_env
    plain = load_scenario(_scenario(tmp_path / "foreign" / "plain", META))
    assert foreign_agent(plain) is None


def test_default_base_url_variable(tmp_path: Path) -> None:
    scenario = load_scenario(_scenario(tmp_path / "foreign" / "x", META + "agent: [x]\n"))
    agent = foreign_agent(scenario)
    assert agent is not None
    assert agent.base_url_env == "OPENAI_BASE_URL"


def test_the_agent_environment_is_an_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*secret_env_names(), "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN",
                 "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "GOOGLE_APPLICATION_CREDENTIALS",
                 "AZURE_CLIENT_SECRET", "ACTIONS_RUNTIME_TOKEN", "NPM_TOKEN", "SSH_AUTH_SOCK",
                 "DSH_SESSIONS_ROOT", "HTTPS_PROXY", "LD_PRELOAD", "PYTHONPATH", "BASH_ENV",
                 "NODE_OPTIONS", "OPENAI_BASE_URL"):  # fmt: skip
        monkeypatch.setenv(name, "caller-value")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    agent = ForeignAgent(("x",), "OPENAI_BASE_URL", {"OPENAI_API_KEY": "placeholder"})
    env = agent.environment("http://127.0.0.1:1/v1", "/run/home", "/run/tmp")
    assert "caller-value" not in env.values()
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:1/v1"
    assert env["OPENAI_API_KEY"] == "placeholder"  # only what snapshot.yml set
    assert (env["HOME"], env["TMPDIR"], env["LC_ALL"]) == ("/run/home", "/run/tmp", "C.UTF-8")
    assert set(env) <= {"PATH", "LANG", "LANGUAGE", "LC_ALL", "TERM", "TZ", "HOME", "TMPDIR",
                        "TMP", "TEMP", "OPENAI_API_KEY", "OPENAI_BASE_URL"}  # fmt: skip


def test_agent_env_values_take_the_proxy_url_where_they_say_base_url() -> None:
    # Mistral Vibe takes its endpoint inside a JSON list of providers, not in a variable.
    providers = '[{"name": "proxy", "api_base": "{base_url}"}]'
    agent = ForeignAgent(("x",), "OPENAI_BASE_URL", {"VIBE_PROVIDERS": providers, "M": "m"})
    env = agent.environment("http://127.0.0.1:5/v1", "/run/home", "/run/tmp")
    assert json.loads(env["VIBE_PROVIDERS"])[0]["api_base"] == "http://127.0.0.1:5/v1"
    assert (env["M"], env["OPENAI_BASE_URL"]) == ("m", "http://127.0.0.1:5/v1")


def test_the_private_paths_are_placeholders_absolute_and_as_the_cwd_reaches_them(
    tmp_path: Path,
) -> None:
    # Qwen Code names its home's files relative to its workspace ("../dsh-tool-x1/home/…").
    sandbox, cwd = ToolSandbox(root=tmp_path), tmp_path / "cwd"
    paths = private_paths(sandbox, cwd)
    home = sandbox.home.relative_to(tmp_path)
    assert paths[str(sandbox.home)] == paths[f"../{home}"] == "{{home}}"
    assert paths[str(sandbox.tmp)] == paths[f"../{sandbox.tmp.relative_to(tmp_path)}"] == "{{tmp}}"
    assert private_paths(sandbox, None) == {
        str(sandbox.home): "{{home}}",
        str(sandbox.tmp): "{{tmp}}",
    }


# --- the command line ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", ""], "argument --agent: '': List should have at least 1 item"),
        (["--agent", '"unclosed'], "No closing quotation"),
        (["--agent", "{py} x"], "unknown placeholder {py}"),
        (["--agent", "x", "--agent-base-url-env", "1X"], "not an environment variable name"),
        (["--agent-base-url-env", "X"], "--agent-base-url-env needs --agent"),
    ],
)
def test_bad_agent_arguments_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    folder = _scenario(tmp_path / "foreign" / "x", META)
    with pytest.raises(SystemExit) as info:
        main(["replay", *args, str(folder)])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


# --- end to end ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_foreign_agent_is_recorded_then_replayed_through_the_gate(tmp_path: Path) -> None:
    folder = _unrecorded_copy(tmp_path)
    scenario = load_scenario(folder)
    # Record: the scripted server lives only inside this run; the proxy records the calls.
    recorded = run_scenario(scenario, SnapshotSettings(mode="record-scripted", timeout=60))
    assert recorded.ok, recorded.failures
    assert recorded.written == ["session.jsonl", "stdout.expected.jsonl"]
    assert recorded.usage.calls == 1
    log = [json.loads(line) for line in (folder / "session.jsonl").read_text().splitlines()]
    assert log[0] == {"type": "session", "version": 0, "id": "{{session:0}}", "createdAt": 0}
    texts = [e["data"]["chunk"].get("text") for e in log if e["type"] == "assistant/chunk"]
    assert "".join(t for t in texts if t) == "PONG"
    user = next(e for e in log if e["type"] == "user/message")
    assert user["data"]["content"][0]["text"] == "Reply with exactly the word: PONG."
    frames = [
        json.loads(line) for line in (folder / "stdout.expected.jsonl").read_text().splitlines()
    ]
    chunks = [
        f["params"]["update"]["content"]["text"]
        for f in frames
        if f.get("method") == "session/update"
    ]
    assert chunks == ["Client sent:", "Reply with exactly the word: PONG.", "PO", "NG"]
    assert frames[0]["result"]["agentInfo"]["name"] == "example-agent"

    # Replay, keyless, with no model server anywhere: both proxy stores, green.
    scenario = load_scenario(folder)
    for composition in ("jsonl", "sqlite"):
        replayed = run_scenario(scenario, SnapshotSettings(timeout=60), composition)
        assert replayed.ok, (composition, replayed.failures)
        assert replayed.calls_replayed == 1
    # Refresh rewrites nothing: the logs are the committed ones, the frames the same.
    before = {n: (folder / n).read_bytes() for n in FIXTURES}
    refreshed = run_scenario(scenario, SnapshotSettings(mode="refresh", timeout=60))
    assert refreshed.ok, refreshed.failures
    assert refreshed.written == []
    assert {n: (folder / n).read_bytes() for n in FIXTURES} == before


@pytest.mark.slow
def test_replay_bites_on_a_changed_answer_and_a_changed_request(tmp_path: Path) -> None:
    folder = _unrecorded_copy(tmp_path)
    assert run_scenario(load_scenario(folder), SnapshotSettings(mode="record-scripted")).ok
    primary = folder / "session.jsonl"
    recorded = primary.read_text(encoding="utf-8")

    # The recording answers differently from what the committed stdout shows.
    primary.write_text(recorded.replace('"text":"NG"', '"text":"NX"'), encoding="utf-8")
    changed = run_scenario(load_scenario(folder), SnapshotSettings())
    assert not changed.ok
    assert any("stdout differs" in f and "NX" in f for f in changed.failures), changed.failures

    # The agent now asks something else than it asked when recorded: the proxy refuses the
    # call (HTTP 422 request-mismatch), the agent's prompt fails, and the failure says why.
    primary.write_text(recorded, encoding="utf-8")
    steps = json.loads((folder / "input.json").read_text(encoding="utf-8"))
    steps["steps"][2]["text"] = "Reply with exactly the word: PING."
    (folder / "input.json").write_text(json.dumps(steps), encoding="utf-8")
    mismatched = run_scenario(load_scenario(folder), SnapshotSettings())
    assert not mismatched.ok
    joined = "\n".join(mismatched.failures)
    assert "422" in joined
    assert "differ from the recording" in joined
    assert "PING" in joined
    # The cause is the headline, then only the last lines of the agent's stderr: not its
    # escaped JSON-RPC error, not its whole traceback (issue 22, diffs a person can read).
    headline = mismatched.failures[0]
    assert headline.index("differ from the recording") < headline.index("the agent stopped")
    assert "its stderr ends:" in headline
    assert '"code": -32603' not in headline
    assert "Traceback" not in headline
    assert headline.count("differ from the recording") <= 2


def test_a_live_recording_keeps_the_key_in_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``record``: the upstream demands the key; only the proxy has it, and no byte written
    holds it."""
    folder = _unrecorded_copy(tmp_path)
    key = "sk-" + "0123456789abcdef" * 2
    with ScriptedModelServer(api_key=key) as upstream:
        upstream.add_session([_answer("PONG")])
        monkeypatch.setenv(_LIVE.env_name("base_url"), upstream.base_url)
        result = run_scenario(
            load_scenario(folder), SnapshotSettings(mode="record", api_key=SecretStr(key))
        )
        assert result.ok, result.failures
        # The agent sent its placeholder; the upstream (401 to any other key) saw the proxy's.
        calls = [r for r in upstream.requests if r.path.endswith("/chat/completions")]
        assert [(r.status, r.authorized) for r in calls] == [(200, True)]
    for path in folder.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert "recording: live" in (folder / "snapshot.yml").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("env", "says"),
    [
        pytest.param({"model": "another-model"}, "not the configured live model", id="model"),
        pytest.param({"max_calls": "1"}, "max_calls 1", id="max-calls"),
    ],
)
def test_a_live_recording_outside_the_policy_fails_naming_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], says: str
) -> None:
    """Red team 4 F11: the agent writes what the key is spent on, so a live recording forwards
    only the configured model, within DSH_RECORD_MAX_* bounds; a refused call fails the run
    with the limit named and never reaches the upstream."""
    folder = _unrecorded_copy(tmp_path)
    if "model" in env:
        monkeypatch.setenv(_LIVE.env_name("model"), env["model"])
    if "max_calls" in env:
        monkeypatch.setenv("DSH_RECORD_MAX_CALLS", env["max_calls"])
        # The example agent makes one call per prompt: a second prompt is a second call.
        steps = json.loads((folder / "input.json").read_text(encoding="utf-8"))
        steps["steps"].append({"op": "prompt", "text": "Again."})
        (folder / "input.json").write_text(json.dumps(steps), encoding="utf-8")
    key = "sk-" + "fedcba9876543210" * 2
    with ScriptedModelServer(api_key=key) as upstream:
        upstream.add_session([_answer("PONG")])
        monkeypatch.setenv(_LIVE.env_name("base_url"), upstream.base_url)
        result = run_scenario(
            load_scenario(folder), SnapshotSettings(mode="record", api_key=SecretStr(key))
        )
        calls = [r for r in upstream.requests if r.path.endswith("/chat/completions")]
    assert not result.ok
    failures = "\n".join(result.failures)
    assert "record policy refused a model call" in failures
    assert says in failures
    assert len(calls) == (1 if "max_calls" in env else 0)
    assert not any((folder / n).exists() for n in FIXTURES)


def test_a_key_the_model_echoes_is_never_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy's recorded logs go through the key scan before they are published."""
    folder = _unrecorded_copy(tmp_path)
    planted = "sk-" + "a1b2c3d4e5f6" * 3
    with ScriptedModelServer() as upstream:  # the live API, answering with a key
        upstream.add_session([_answer(f"PONG {planted}")])
        monkeypatch.setenv(_LIVE.env_name("base_url"), upstream.base_url)
        result = run_scenario(
            load_scenario(folder), SnapshotSettings(mode="record", api_key=SecretStr("k" * 8))
        )
    assert not result.ok
    failures = "\n".join(result.failures)
    assert "NOT written" in failures
    assert "session.jsonl" in failures
    assert not any((folder / n).exists() for n in FIXTURES)
    assert planted not in failures


@pytest.mark.slow
def test_the_cli_agent_option_runs_another_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--agent CMD`` on a scenario whose snapshot.yml names none."""
    folder = _unrecorded_copy(tmp_path)
    agent = folder / "agent.py"
    outside = Path(shutil.move(agent, tmp_path / "example_agent.py"))
    (folder / "snapshot.yml").write_text(META + "loop: current\n", encoding="utf-8")
    # `env` sets the placeholder key the SDK insists on (snapshot.yml's agent_env otherwise).
    command = f"env OPENAI_API_KEY=placeholder {{python}} {outside}"
    assert main(["record", "--scripted", "--agent", command, str(folder)]) == 0
    assert "1 passed" in capsys.readouterr().out
    assert main(["replay", "--agent", command, str(folder)]) == 0
    # The proxy records into any store: the foreign agent replays on every default backend.
    runs = len(default_store_backend_names())
    assert f"{runs} passed" in capsys.readouterr().out
    # Without --agent the scenario runs our agent, which answers differently: red.
    assert main(["replay", "--composition", "jsonl", str(folder)]) == 1


@requires_sandbox
def test_a_hostile_agent_command_cannot_write_outside_the_run(tmp_path: Path) -> None:
    """``agent:`` comes from the scenario, which a pull request controls: the command runs in
    the bash tool's sandbox (SECURITY.md)."""
    outside = tmp_path / "outside" / "planted.txt"
    outside.parent.mkdir()
    script = (
        "import pathlib, sys\n"
        "pathlib.Path('inside.txt').write_text('ok')\n"  # the run's cwd: allowed
        f"pathlib.Path({str(outside)!r}).write_text('pwned')\n"
    )
    meta = META + "agent: ['{python}', '{scenario}/hostile.py']\n"
    folder = _scenario(tmp_path / "foreign" / "hostile", meta)
    (folder / "hostile.py").write_text(script, encoding="utf-8")
    result = run_scenario(load_scenario(folder), SnapshotSettings())
    assert not result.ok
    assert not outside.exists()
    # Its folder is hidden inside (under the host's /tmp, which the sandbox replaces).
    assert "No such file or directory" in "\n".join(result.failures)


@requires_sandbox
def test_a_hostile_agent_reaches_nothing_but_its_proxy(tmp_path: Path) -> None:
    """A foreign agent holds no credential of the caller and reaches only the proxy: not a
    listener on the host's loopback, not a Unix socket, not the terminal."""
    pwd_home = pwd.getpwuid(os.getuid()).pw_dir
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        script = textwrap.dedent(f"""\
            import os, socket, sys, urllib.request
            print("env", sorted(os.environ), file=sys.stderr)
            for name in ("GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"):
                print(name, os.environ.get(name), file=sys.stderr)
            try:
                socket.create_connection(("127.0.0.1", {port}), 5)
                print("host loopback reached", file=sys.stderr)
            except OSError as exc:
                print("host loopback:", exc.strerror, file=sys.stderr)
            try:
                socket.socket(socket.AF_UNIX).connect("/run/anything")
            except OSError as exc:
                print("unix socket:", exc.strerror, file=sys.stderr)
            import resource
            kinds = ("DATA", "FSIZE", "NOFILE", "CORE")
            limits = [resource.getrlimit(getattr(resource, "RLIMIT_" + k)) for k in kinds]
            print("limits", limits, file=sys.stderr)
            for home in {pwd_home!r}, "/root":
                if os.path.isdir(home):
                    files = [n for n in os.listdir(home) if os.path.isfile(os.path.join(home, n))]
                    print("home files", home, files, file=sys.stderr)
            base = os.environ["OPENAI_BASE_URL"].removesuffix("/v1")
            try:
                urllib.request.urlopen(base + "/nothing-here", timeout=10)
            except urllib.error.HTTPError as exc:
                print("proxy answered", exc.code, file=sys.stderr)
            sys.exit(3)
            """)
        meta = META + "agent: ['{python}', '{scenario}/probe.py']\n"
        folder = _scenario(tmp_path / "foreign" / "probe", meta)
        (folder / "probe.py").write_text(script, encoding="utf-8")
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("GITHUB_TOKEN", "ghp_fake_token_of_the_runner")
            patch.setenv("AWS_SECRET_ACCESS_KEY", "fake/aws/secret")
            result = run_scenario(load_scenario(folder), SnapshotSettings())
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    failures = "\n".join(result.failures)
    assert "(exit code 3)" in failures
    assert "GITHUB_TOKEN None" in failures
    assert "AWS_SECRET_ACCESS_KEY None" in failures
    assert "host loopback: Connection refused" in failures
    assert "unix socket: Address family not supported by protocol" in failures
    assert "proxy answered 404" in failures
    # The sandbox's resource limits hold for it, and no home shows a file (SECURITY.md).
    gib = 1 << 30
    limits = [(4 * gib, 4 * gib), (gib, gib), (4096, 4096), (0, 0)]
    assert f"limits {limits}" in failures
    for home in {pwd_home, "/root"}:
        if os.path.isdir(home):
            assert f"home files {home} []" in failures


def test_an_override_is_refused_for_a_foreign_agent(tmp_path: Path) -> None:
    folder = _unrecorded_copy(tmp_path)
    (folder / "replay.override.json").write_text('{"patches": []}', encoding="utf-8")
    result = run_scenario(load_scenario(folder), SnapshotSettings())
    assert not result.ok
    assert "does not read replay.override.json: remove it" in result.failures[0]


def test_the_model_side_errors_are_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _unrecorded_copy(tmp_path)
    scenario = load_scenario(folder)
    # A live recording without a key: nothing starts.
    keyless = run_scenario(scenario, SnapshotSettings(mode="record", api_key=None))
    assert keyless.failures == [
        f"AgentError: record needs {_LIVE.env_name('api_key')} (it goes to the proxy only)"
    ]

    # A proxy that cannot start (no loopback port): the run says so, the cause quoted.
    def no_port() -> None:
        raise OSError(98, "no port for you")

    monkeypatch.setattr("dsh_snapshot._foreign.shared_hub", no_port)
    dead = run_scenario(scenario, SnapshotSettings(mode="record-scripted"))
    assert len(dead.failures) == 1
    assert "dsh-llm-proxy did not start" in dead.failures[0]
    assert "no port for you" in dead.failures[0]
    # A committed log that cannot be read: staging it names the file and line.
    header = {"type": "session", "version": 0, "id": "x", "createdAt": 0}
    (folder / "session.jsonl").write_text(json.dumps(header) + "\n{oops\n")
    (folder / "stdout.expected.jsonl").write_text("")
    broken = run_scenario(load_scenario(folder), SnapshotSettings())
    assert not broken.ok
    assert "session.jsonl" in broken.failures[0]
    assert "session.jsonl:2" in broken.failures[0]


def test_the_agent_option_keeps_the_scenarios_agent_env(tmp_path: Path) -> None:
    meta = META + (
        "agent: ['{python}', 'a.py']\nagent_env: {OPENAI_API_KEY: placeholder, OPENAI_MODEL: m}\n"
    )
    scenario = load_scenario(_scenario(tmp_path / "s", meta))
    override = ForeignAgent.from_command_line("other-agent --acp", "MY_BASE_URL")
    chosen = foreign_agent(scenario, override)
    assert chosen is not None
    assert chosen.command == ("other-agent", "--acp")
    assert chosen.base_url_env == "MY_BASE_URL"
    assert dict(chosen.env) == {"OPENAI_API_KEY": "placeholder", "OPENAI_MODEL": "m"}


@pytest.mark.slow
def test_new_foreign_scaffolds_a_scenario_that_records_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parent = tmp_path / "foreign"
    assert (
        main(["new", "mine", "--dir", str(parent), "--foreign", "{python} {scenario}/agent.py"])
        == 0
    )
    folder = parent / "mine"
    assert "dsh-snapshot record --scripted" in capsys.readouterr().out
    assert (folder / ".gitignore").read_text() == ".pending/\n"
    shutil.copy(EXAMPLE / "agent.py", folder / "agent.py")
    scenario = load_scenario(folder)
    assert scenario.meta is not None
    assert scenario.meta.agent == ["{python}", "{scenario}/agent.py"]
    assert scenario.meta.agent_env == {
        "OPENAI_API_KEY": "placeholder",
        "OPENAI_MODEL": "deepseek-flash",
    }
    recorded = run_scenario(scenario, SnapshotSettings(mode="record-scripted", timeout=60))
    assert recorded.ok, recorded.failures
    replayed = run_scenario(load_scenario(folder), SnapshotSettings(timeout=60), "jsonl")
    assert replayed.ok, replayed.failures
    # A bad agent command is refused before anything is written.
    assert main(["new", "bad", "--dir", str(parent), "--foreign", '"unclosed']) == 2
    assert "No closing quotation" in capsys.readouterr().err
    assert not (parent / "bad").exists()


@pytest.mark.slow
def test_keep_answers_takes_a_changed_prompt_and_keeps_the_recorded_answer(
    tmp_path: Path,
) -> None:
    folder = _unrecorded_copy(tmp_path)
    assert run_scenario(load_scenario(folder), SnapshotSettings(mode="record-scripted")).ok
    answers = (folder / "session.jsonl").read_text().count('"PO"')
    steps = json.loads((folder / "input.json").read_text())
    steps["steps"][-1]["text"] = "Reply with the word PONG, please."
    (folder / "input.json").write_text(json.dumps(steps))
    drifted = run_scenario(load_scenario(folder), SnapshotSettings(timeout=60), "jsonl")
    assert not drifted.ok
    assert "new messages differ" in drifted.failures[0]
    kept = run_scenario(load_scenario(folder), SnapshotSettings(mode="record-accept", timeout=60))
    assert kept.ok, kept.failures
    assert len(kept.accepted) == 1
    assert "please" in kept.accepted[0]
    log = (folder / "session.jsonl").read_text()
    assert "Reply with the word PONG, please." in log
    assert log.count('"PO"') == answers  # the recorded answer, not a new one
    replayed = run_scenario(load_scenario(folder), SnapshotSettings(timeout=60), "jsonl")
    assert replayed.ok, replayed.failures
    # A change that needs another call has no recorded answer to keep: nothing is written.
    steps["steps"].append({"op": "prompt", "text": "And again."})
    (folder / "input.json").write_text(json.dumps(steps))
    before = log
    more = run_scenario(load_scenario(folder), SnapshotSettings(mode="record-accept", timeout=60))
    assert not more.ok
    assert more.failures[0].startswith(
        "AgentError: the recorded answers do not fit the new requests: "
    ), more.failures[0]
    assert "more sessions than the recording" in more.failures[0]
    assert (folder / "session.jsonl").read_text() == before


def test_the_gate_loads_the_proxy_server_only_for_a_foreign_run() -> None:
    """One ``dsh-llm-proxy`` per gate process serves its foreign runs; a gate that runs none
    never imports the server stack (uvicorn, starlette, httpx: ~0.15 CPU-s of its start)."""
    probe = (
        "import sys\n"
        "import dsh_snapshot.cli\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'uvicorn', 'starlette', 'httpx'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"

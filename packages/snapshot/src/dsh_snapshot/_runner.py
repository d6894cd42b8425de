"""Running one scenario: a fresh temp cwd and sessions root, the real agent, harvest, compare.

The same run serves every mode. ``replay`` compares and writes nothing; ``refresh`` and
``record`` write the harvested, normalised outputs back into the folder atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dsh_core import DshError
from dsh_llm_replay import NotConsumedError, ReplayError, check_report
from dsh_snapshot._agent import AgentError, AgentProcess, as_object, base_env
from dsh_snapshot._compat import UPSTREAM_ALLOWANCES, Allowances, apply_allowances, turn_messages
from dsh_snapshot._confine import check_scenario_links, check_step_paths, copy_workspace
from dsh_snapshot._diff import Difference, first_difference
from dsh_snapshot._expect import check_expectations
from dsh_snapshot._foreign import (
    ForeignAgent,
    ForeignModel,
    foreign_agent,
    foreign_model,
    normalised_ids,
)
from dsh_snapshot._harvest import expected_fixtures as _expected
from dsh_snapshot._harvest import harvest, harvest_logs
from dsh_snapshot._keyscan import redact, scan_folder
from dsh_snapshot._normalize import (
    Normalizer,
    dumps_line,
    logs_cwds_and_ids,
    normalize_frames,
    normalize_log,
)
from dsh_snapshot._provenance import (
    Provenance,
    Usage,
    live_provenance,
    recording_usage,
    with_provenance,
)
from dsh_snapshot._publish import publish_fixtures
from dsh_snapshot._scenario import META_FILE, AllowEntry, Scenario
from dsh_snapshot._warm import WarmAgents

__all__ = [
    "Check",
    "Composition",
    "Mode",
    "RunOptions",
    "ScenarioResult",
    "harvest",
    "run_scenario",
    "write_fixtures",
]

Mode = Literal["replay", "refresh", "record", "record-scripted"]
Composition = Literal["jsonl", "sqlite"]
Check = Literal["fixtures", "messages"]
_EXIT_NOT_CONSUMED = 3
_EMPTY_PRIMARY = '{"type":"session","version":0,"id":"{{sessionId}}","createdAt":0}\n'


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to run a scenario.

    Attributes:
        mode: ``replay`` (compare only), ``refresh`` (replay, rewrite outputs), ``record`` (live
            API, rewrite outputs) or ``record-scripted`` (scripted model server, rewrite outputs).
        composition: which persistence backend the agent uses.
        timeout: seconds any single wait for the agent may take.
        seed_slice: ``False`` turns the replay client's seedLength slice off (the proof only).
        api_key: the live key (``record`` only).
        check: in ``replay``, ``fixtures`` compares every log and stdout frame; ``messages``
            compares only what a client saw per prompt (agent message text and stop reason),
            for recordings made by an agent with features this one lacks.
        allowances: deliberate differences from the fixtures to forgive; ``None`` means none
            for our scenarios and ``UPSTREAM_ALLOWANCES`` for upstream folders (no
            ``snapshot.yml``), as COMPATIBILITY.md lists them.
        child_jitter_ms: test-only, replay: each subagent child's model call first sleeps a
            random 0..N ms (``DSH_REPLAY_CHILD_JITTER_MS``), to shuffle concurrent children.
        cold: a batch starts every agent as a fresh interpreter instead of forking it from a
            warm, pre-imported one (:class:`dsh_snapshot._warm.WarmAgents`).
        agent: run this ACP agent instead of ours, through ``dsh-llm-proxy`` (``--agent``);
            ``None`` means the scenario's ``agent:``, if any (:mod:`dsh_snapshot._foreign`).
    """

    mode: Mode = "replay"
    composition: Composition = "jsonl"
    timeout: float = 60.0
    seed_slice: bool = True
    api_key: str | None = None
    check: Check = "fixtures"
    allowances: Allowances | None = None
    child_jitter_ms: int = 0
    cold: bool = False
    agent: ForeignAgent | None = None


@dataclass(slots=True)
class ScenarioResult:
    """What one run found."""

    scenario: Scenario
    options: RunOptions
    ok: bool = False
    failures: list[str] = field(default_factory=list[str])
    differences: list[Difference] = field(default_factory=list[Difference])
    sessions: int = 0
    calls_replayed: int = 0
    seconds: float = 0.0
    written: list[str] = field(default_factory=list[str])
    logs: list[list[Any]] = field(default_factory=list[list[Any]])
    frames: list[Any] = field(default_factory=list[Any])
    needs: list[str] = field(default_factory=list[str])
    usage: Usage = field(default_factory=Usage)
    missed: list[str] = field(default_factory=list[str])
    attempts: int = 1

    @property
    def calls(self) -> int:
        """Model calls of the run: replayed ones, else those the harvested logs record."""
        return self.calls_replayed or self.usage.calls

    @property
    def summary(self) -> str:
        """The first failure, or ``"ok"``."""
        return self.failures[0] if self.failures else "ok"


# --- fixtures -------------------------------------------------------------------------------


def _render(rows: list[Any]) -> str:
    return "".join(dumps_line(r) + "\n" for r in rows)


def write_fixtures(
    scenario: Scenario,
    logs: list[list[Any]],
    frames: list[Any],
    recording: str | None,
    literals: Iterable[str] = (),
    provenance: Provenance | None = None,
) -> list[str]:
    """Publish normalised outputs into the scenario folder: staged, scanned, then atomically
    moved into place; stale children are removed only then (see :func:`publish_fixtures`).

    ``snapshot.yml`` gets ``recording`` and ``provenance`` (see :func:`with_provenance`) when a
    recording is given; its other lines stay as they are.

    Returns:
        the names of the files whose bytes changed (``-name`` for a removed child).

    Raises:
        DirtyRecordingError: the key scan flagged the new outputs; nothing was written.
    """
    files: dict[str, str | bytes] = {scenario.stdout_file.name: _render(frames)}
    for index, rows in enumerate(logs):
        name = "session.jsonl" if index == 0 else f"session.{index}.jsonl"
        files[name] = _render(rows)
    allowlist: tuple[AllowEntry, ...] = ()
    if scenario.meta is not None:
        allowlist = scenario.meta.secrets_allowlist
        if recording is not None:
            meta_text = (scenario.path / META_FILE).read_text(encoding="utf-8")
            files[META_FILE] = with_provenance(meta_text, recording, provenance, scenario.meta.loop)
    return publish_fixtures(scenario.path, files, allowlist=allowlist, literals=literals)


# --- the model side of a run --------------------------------------------------------------------


@contextlib.contextmanager
def _scripted_server(script: Path, timeout: float) -> Generator[str, None, None]:
    exe = Path(sys.executable).with_name("dsh-scripted-model-server")
    cmd = [str(exe)] if exe.is_file() else ["dsh-scripted-model-server"]
    # The server stops at the end of its stdin: hold a pipe open for the whole run.
    proc = subprocess.Popen(
        [*cmd, "--script", str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        base_url = None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("BASE_URL="):
                base_url = line.strip().split("=", 1)[1]
                break
        if base_url is None:
            err = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
            raise AgentError(f"the scripted model server did not print BASE_URL=…: {err}")
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _replay_env(scenario: Scenario, tmp: Path, options: RunOptions) -> dict[str, str]:
    primary = scenario.primary_file
    if not primary.is_file():
        # An authored scenario's first refresh: the bare override is the whole script.
        primary = tmp / "empty.session.jsonl"
        primary.write_text(_EMPTY_PRIMARY, encoding="utf-8")
    env = {
        "DSH_MODEL_CLIENT": "replay",
        "DSH_SNAPSHOT_FILE": str(primary),
        "DSH_REPLAY_REPORT": str(tmp / "replay-report.json"),
    }
    if scenario.child_files:
        env["DSH_SNAPSHOT_CHILD_FILES"] = os.pathsep.join(str(p) for p in scenario.child_files)
    if scenario.override_file is not None:
        env["DSH_SNAPSHOT_OVERRIDE"] = str(scenario.override_file)
    if not options.seed_slice:
        env["DSH_REPLAY_SEED_SLICE"] = "false"
    if options.child_jitter_ms:
        env["DSH_REPLAY_CHILD_JITTER_MS"] = str(options.child_jitter_ms)
    return env


def _check_report(path: Path, result: ScenarioResult) -> None:
    """Fold the replay report into the result: calls replayed, and ``assert_consumed``."""
    try:
        report = check_report(path)
    except NotConsumedError as exc:
        result.failures.append(f"assert_consumed: {exc}")
        with contextlib.suppress(ValueError, OSError):
            raw = as_object(json.loads(path.read_text(encoding="utf-8"))) or {}
            scripts: list[Any] = raw.get("scripts") or []
            result.calls_replayed = sum(
                int((as_object(s) or {}).get("replayedCalls") or 0) for s in scripts
            )
        return
    except ReplayError as exc:
        result.failures.append(f"replay report: {exc}")
        return
    result.calls_replayed = sum(s["replayedCalls"] for s in report["scripts"])


# --- comparison ---------------------------------------------------------------------------------


def _compare_messages(scenario: Scenario, frames: list[Any], result: ScenarioResult) -> None:
    _, exp_frames = _expected(scenario)
    expected, actual = turn_messages(exp_frames), turn_messages(frames)
    for index, (exp, act) in enumerate(zip(expected, actual, strict=False), 1):
        if exp != act:
            result.failures.append(f"prompt {index}: expected {exp}, actual {act}")
            return
    if len(expected) != len(actual):
        result.failures.append(
            f"prompt count: expected {len(expected)} prompt responses, actual {len(actual)}"
        )


def _compare(
    scenario: Scenario,
    logs: list[list[Any]],
    frames: list[Any],
    result: ScenarioResult,
    allowances: Allowances,
) -> None:
    exp_logs, exp_frames = _expected(scenario)
    if allowances.any:
        logs, frames = apply_allowances(allowances, exp_logs, logs, exp_frames, frames)
    if len(exp_logs) != len(logs):
        result.failures.append(
            f"session count: expected {len(exp_logs)} logs "
            f"(session.jsonl + {max(len(exp_logs) - 1, 0)} children), "
            f"harvested {len(logs)}"
        )
    for index, (exp, act) in enumerate(zip(exp_logs, logs, strict=False)):
        name = "session.jsonl" if index == 0 else f"session.{index}.jsonl"
        diff = first_difference(name, exp, act)
        if diff is not None:
            result.differences.append(diff)
    if scenario.stdout_file.is_file():
        diff = first_difference(scenario.stdout_file.name, exp_frames, frames)
        if diff is not None:
            result.differences.append(diff)
    else:
        result.failures.append(
            f"{scenario.stdout_file.name} is missing: record or refresh the scenario first"
        )
    result.failures.extend(
        f"{'stdout' if d.file.startswith('stdout') else 'log'} differs: {d}"
        for d in result.differences
    )


# --- the run ------------------------------------------------------------------------------------


def run_scenario(
    scenario: Scenario, options: RunOptions | None = None, agents: WarmAgents | None = None
) -> ScenarioResult:
    """Run one scenario through the real agent and compare (or write) its fixtures.

    The agent is forked from one of ``agents`` when given, else started as a fresh interpreter.
    Never raises for a scenario problem: everything that went wrong is in the result.
    """
    options = options or RunOptions()
    result = ScenarioResult(scenario, options)
    started = time.perf_counter()
    try:
        # Links are refused before any file of the scenario is read (SECURITY.md); then a
        # scenario that needs an op, a tool or a feature we lack is not run: it says so.
        check_scenario_links(scenario)
        result.needs = scenario.needs(recordings=options.mode in ("replay", "refresh"))
        if result.needs:
            result.failures.append(f"needs {'; '.join(result.needs)}")
        else:
            _run(scenario, options, result, agents)
    except (DshError, OSError, ValueError) as exc:
        result.failures.insert(0, f"{type(exc).__name__}: {exc}")
    # The last guard: a failure quotes fixtures and agent output, which must not carry a key
    # onto a terminal or a CI log.
    literals = [options.api_key] if options.api_key else []
    result.failures = [redact(f, literals) for f in result.failures]
    result.seconds = time.perf_counter() - started
    result.ok = not result.failures
    return result


def _meets_expectations(scenario: Scenario, result: ScenarioResult) -> bool:
    """Record modes: check ``expect:`` of ``snapshot.yml``; a miss writes nothing."""
    if scenario.meta is None or not scenario.meta.expect:
        return True
    result.missed = check_expectations(scenario.meta.expect, result.logs)
    result.failures.extend(f"expectation missed: {m}" for m in result.missed)
    return not result.missed


def _run(
    scenario: Scenario, options: RunOptions, result: ScenarioResult, agents: WarmAgents | None
) -> None:
    # A scenario arrives in a pull request: it is scanned before anything of it runs, in
    # every mode (SECURITY.md); run_scenario has already refused links leading out.
    literals = [options.api_key] if options.api_key else []
    allowlist = scenario.meta.secrets_allowlist if scenario.meta is not None else ()
    findings = scan_folder(scenario.path, allowlist, literals)
    if findings:
        result.failures.extend(f"key scan: {f}" for f in findings)
        return
    tmp = Path(tempfile.mkdtemp(prefix="dsh-snap-")).resolve()
    try:
        cwd, root = tmp / "cwd", tmp / "sessions"
        if scenario.workspace is not None:
            copy_workspace(scenario.workspace, cwd)
        else:
            cwd.mkdir()
        check_step_paths(scenario, cwd)
        root.mkdir()
        env = {
            "DSH_SESSIONS_ROOT": str(root),
            "DSH_PERSISTENCE": options.composition,
            "DSH_LOOP_PROFILE": scenario.loop,
        }
        replaying = options.mode in ("replay", "refresh") or scenario.authored
        # Recorded commands run confined; only a live recording may reach the network.
        env |= {
            "DSH_SANDBOX": "strict" if os.environ.get("CI") == "true" else "warn",
            "DSH_SANDBOX_NETWORK": "deny" if replaying else "allow",
        }
        foreign = foreign_agent(scenario, options.agent)
        model: ForeignModel | None = None
        with contextlib.ExitStack() as stack:
            if foreign is not None:
                model = stack.enter_context(
                    foreign_model(
                        foreign,
                        scenario,
                        replaying=replaying,
                        scripted=options.mode == "record-scripted",
                        store=options.composition,
                        tmp=tmp,
                        api_key=options.api_key,
                        timeout=options.timeout,
                    )
                )
            elif replaying:
                env |= _replay_env(scenario, tmp, options)
            elif options.mode == "record-scripted":
                if scenario.script_file is None:
                    raise AgentError(
                        f"{scenario.path}: record --scripted needs model.script.json "
                        f"(or a bare-array replay.override.json)"
                    )
                base = stack.enter_context(_scripted_server(scenario.script_file, options.timeout))
                env |= {
                    "DSH_MODEL_CLIENT": "deepseek",
                    "DEEPSEEK_BASE_URL": base,
                    "DEEPSEEK_API_KEY": "scripted",
                    # The scripted server routes each request to its session by this header.
                    "DEEPSEEK_SEND_SESSION_ID": "true",
                }
            else:
                if not options.api_key:
                    raise AgentError("record needs DEEPSEEK_API_KEY")
                # Every DEEPSEEK_* setting (model, thinking, base URL…) reaches the agent.
                env |= {k: v for k, v in os.environ.items() if k.startswith("DEEPSEEK_") and v}
                env |= {"DSH_MODEL_CLIENT": "deepseek", "DEEPSEEK_API_KEY": options.api_key}
            if model is not None:
                agent = model.start(cwd, options.timeout)
            else:
                server = stack.enter_context(agents.lease()) if agents is not None else None
                agent = AgentProcess(cwd, base_env(env), options.timeout, fork_server=server)
            try:
                for step in scenario.steps:
                    agent.run_step(step)
                code = agent.finish()
            finally:
                agent.kill()
        exit_failure = f"the agent exited with code {code}; stderr: {agent.stderr_tail(1500)}"
        # Each harvested log is parsed once: ordering, names and normalising share it.
        if model is not None:
            parsed, agent_ids = model.logs(), normalised_ids(agent.session_ids)
        else:
            parsed, agent_ids = harvest_logs(root, options.composition), agent.session_ids
        result.sessions = len(parsed)
        cwds, ids = logs_cwds_and_ids(parsed)
        norm = Normalizer({str(cwd), *cwds}, {*ids, *agent_ids})
        logs = [normalize_log(log, norm) for log in parsed]
        frames = normalize_frames(agent.frames, norm)
        result.logs, result.frames = logs, frames
        result.usage = recording_usage(logs)
        consumed = True
        if replaying:
            before = len(result.failures)
            _check_report(tmp / "replay-report.json", result)
            consumed = len(result.failures) == before
        # Exit code 3 means "replay not consumed", which the report check has just said better.
        if code != 0 and not (code == _EXIT_NOT_CONSUMED and not consumed):
            result.failures.append(exit_failure)
        if options.mode == "replay" and options.check == "messages":
            _compare_messages(scenario, frames, result)
        elif options.mode == "replay":
            allowances = options.allowances
            if allowances is None:
                allowances = UPSTREAM_ALLOWANCES if scenario.meta is None else Allowances()
            _compare(scenario, logs, frames, result, allowances)
        elif not result.failures and _meets_expectations(scenario, result):
            recording = None
            if scenario.meta is not None:
                recording = (
                    "authored"
                    if scenario.authored
                    else {"record": "live", "record-scripted": "scripted"}.get(
                        options.mode, scenario.meta.recording
                    )
                )
            provenance = None
            if recording == "live":
                from dsh_llm_deepseek import DeepSeekSettings  # noqa: PLC0415 - live record only

                provenance = live_provenance(DeepSeekSettings(), result.usage)
            result.written = write_fixtures(scenario, logs, frames, recording, literals, provenance)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

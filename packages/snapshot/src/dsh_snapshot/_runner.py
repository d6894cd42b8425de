"""Running one scenario: a fresh temp cwd and sessions root, the real agent, harvest, compare.

The same run serves every mode. ``replay`` compares and writes nothing; ``refresh`` and
``record`` write the harvested, normalised outputs back into the folder atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dsh_acp_agent import EXIT_OK, EXIT_REPLAY_NOT_CONSUMED
from dsh_acp_agent.testing import agent_environment
from dsh_core import ALLOW_MODEL_REQUESTS_ENV, DshError, ProcessConfinement, ScenarioFiles
from dsh_core.plugins import DEFAULT_STORE_BACKEND, PluginError, store_backend, store_run
from dsh_llm_replay import (
    NotConsumedError,
    OverrideError,
    ReplayError,
    ReplayReport,
    ReplaySettings,
)
from dsh_snapshot._agent import AgentError, ScenarioAgent, agent_command
from dsh_snapshot._compat import UPSTREAM_ALLOWANCES, Allowances, apply_allowances, turn_messages
from dsh_snapshot._confine import (
    ConfinementError,
    check_scenario_links,
    check_step_paths,
    copy_workspace,
    hidden_from_commands,
)
from dsh_snapshot._determinism import clock_command
from dsh_snapshot._diff import Difference, first_difference
from dsh_snapshot._expect import check_expectations
from dsh_snapshot._foreign import (
    ForeignModel,
    foreign_agent,
    foreign_model,
    normalised_ids,
)
from dsh_snapshot._fsafe import ConfinedPathError
from dsh_snapshot._harvest import expected_fixtures as _expected
from dsh_snapshot._harvest import harvest, harvest_logs, normalized_outputs
from dsh_snapshot._keyscan import redact, scan_folder
from dsh_snapshot._live import key_name, live_env, live_provider, scripted_env
from dsh_snapshot._pending import fixture_files, keep_failure, keep_pending
from dsh_snapshot._provenance import (
    Provenance,
    Usage,
    live_provenance,
    recording_usage,
    with_provenance,
)
from dsh_snapshot._publish import publish_fixtures
from dsh_snapshot._recorded_env import recorded_provider_env
from dsh_snapshot._request_drift import drift_failures, header_note
from dsh_snapshot._scenario import AllowEntry, Scenario, ScenarioError
from dsh_snapshot._served import served_base_url
from dsh_snapshot._settings import Mode, SnapshotSettings
from dsh_snapshot._warm import WarmAgents

BASH_NETWORK_ENV = "DSH_BASH_NETWORK"
"""Set to ``1`` by the user for a live ``record`` to give the network to the commands of
scenarios whose ``snapshot.yml`` asks for it (``bash_network: true``)."""

__all__ = [
    "ScenarioResult",
    "Verdict",
    "harvest",
    "run_scenario",
    "write_fixtures",
]

# A scenario refused for what its files hold or link to: nothing is written into it.
_REFUSALS = (ConfinementError, ConfinedPathError, OverrideError, ScenarioError)

_EMPTY_PRIMARY = '{"type":"session","version":0,"id":"{{sessionId}}","createdAt":0}\n'


Verdict = Literal["pass", "fail", "needs"]


@dataclass(slots=True)
class ScenarioResult:
    """What one run found."""

    scenario: Scenario
    settings: SnapshotSettings
    store: str = DEFAULT_STORE_BACKEND
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
    header_note: str = ""
    accepted: list[str] = field(default_factory=list[str])
    """``record-accept``: the request changes that kept their recorded answers."""

    @property
    def persistence(self) -> str:
        """Deprecated name of ``store`` (removal in 0.3.0)."""
        warnings.warn(
            "ScenarioResult.persistence is deprecated, use .store (removal in 0.3.0)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.store

    @property
    def mode(self) -> Mode:
        """The mode the scenario ran in."""
        return self.settings.mode

    @property
    def calls(self) -> int:
        """Model calls of the run: replayed ones, else those the harvested logs record."""
        return self.calls_replayed or self.usage.calls

    @property
    def verdict(self) -> Verdict:
        """The one verdict every front end shows (CLI, pytest plugin, compat): ``pass`` only
        when the run went through with no failure; ``needs`` (we lack an op, tool or feature,
        so it was not run) is never a pass, wherever it comes from."""
        if self.needs:
            return "needs"
        return "pass" if self.ok and not self.failures else "fail"

    @property
    def summary(self) -> str:
        """The first failure, or ``"ok"``."""
        return self.failures[0] if self.failures else "ok"


# --- fixtures -------------------------------------------------------------------------------


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
    files: dict[str, str | bytes] = {**fixture_files(scenario, logs, frames)}
    allowlist: tuple[AllowEntry, ...] = ()
    if scenario.meta is not None:
        allowlist = scenario.meta.secrets_allowlist
        if recording is not None:
            meta_text = scenario.files.meta.read_text(encoding="utf-8")
            files[ScenarioFiles.META] = with_provenance(
                meta_text, recording, provenance, scenario.meta.loop
            )
    return publish_fixtures(scenario.path, files, allowlist=allowlist, literals=literals)


# --- the model side of a run --------------------------------------------------------------------


def _scripted_server(
    script: Path, tmp: Path, timeout: float, profile: str
) -> AbstractContextManager[str]:
    exe = Path(sys.executable).with_name("dsh-scripted-model-server")
    cmd = [str(exe)] if exe.is_file() else ["dsh-scripted-model-server"]
    # The server stops at the end of its stdin: hold a pipe open for the whole run.
    return served_base_url(
        [*cmd, "--script", str(script), "--profile", profile],
        what="the scripted model server",
        stderr_log=tmp / "scripted-server.stderr",
        timeout=timeout,
        hold_stdin=True,
    )


def replay_settings(scenario: Scenario, tmp: Path, settings: SnapshotSettings) -> ReplaySettings:
    """The replay hand-off to the agent: the scenario's recording, where to write the report.

    Every field is given, so nothing the caller happens to have exported leaks in.
    """
    primary = scenario.primary_file
    if not primary.is_file():
        # An authored scenario's first refresh: the bare override is the whole script.
        primary = tmp / "empty.session.jsonl"
        primary.write_text(_EMPTY_PRIMARY, encoding="utf-8")
    return ReplaySettings(
        snapshot_file=primary,
        snapshot_override=scenario.override_file,
        child_files=scenario.child_files,
        seed_slice=settings.seed_slice,
        report=tmp / "replay-report.json",
        child_jitter_ms=settings.child_jitter_ms,
        # refresh (and an authored record) accept the new header; only replay compares it
        check_headers=settings.mode == "replay",
    )


def replay_env(replay: ReplaySettings) -> dict[str, str]:
    """The agent's model environment in a replayed run: the replay client and its settings.

    A replayed run never needs a live model: if anything tries, it is refused
    (``DSH_ALLOW_MODEL_REQUESTS=0``).
    """
    return {"DSH_MODEL_CLIENT": "replay", ALLOW_MODEL_REQUESTS_ENV: "0", **replay.to_env()}


def _check_report(path: Path, result: ScenarioResult) -> bool:
    """Fold the agent's replay report into the result; True when the recording was consumed."""
    try:
        report = ReplayReport.read(path)
    except ReplayError as exc:
        result.failures.append(f"replay report: {exc}")
        return False
    result.failures.extend(drift_failures(report))
    result.calls_replayed = report.replayed_calls
    try:
        report.assert_consumed()
    except NotConsumedError as exc:
        result.failures.append(f"assert_consumed: {exc}")
        return False
    return True


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
    if scenario.meta is None and not logs and len(exp_logs) == 1 and len(exp_logs[0]) == 1:
        # An upstream folder whose session.jsonl is a bare header (the zero id, createdAt 0)
        # where no session was ever created (reject-extra-dirs): upstream's harness needs the
        # file to start its replay client but compares logs only for scenarios with a model
        # turn (head acp-snapshot suite.ts: comparesLog ?? hasModelTurn).
        exp_logs = []
    if len(exp_logs) != len(logs):
        result.failures.append(
            f"session count: expected {len(exp_logs)} logs "
            f"({ScenarioFiles.PRIMARY} + {max(len(exp_logs) - 1, 0)} children), "
            f"harvested {len(logs)}"
        )
    for index, (exp, act) in enumerate(zip(exp_logs, logs, strict=False)):
        name = ScenarioFiles.session_name(index)
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
    scenario: Scenario,
    settings: SnapshotSettings | None = None,
    store: str = DEFAULT_STORE_BACKEND,
    agents: WarmAgents | None = None,
) -> ScenarioResult:
    """Run one scenario with one store backend through the real agent and compare (or
    write) its fixtures; the unit of :func:`dsh_snapshot.run`.

    The agent is forked from one of ``agents`` when given, else started as a fresh interpreter.
    Never raises for a scenario problem: everything that went wrong is in the result.
    """
    settings = settings or SnapshotSettings()
    result = ScenarioResult(scenario, settings, store)
    started = time.perf_counter()
    try:
        # Links are refused before any file of the scenario is read (SECURITY.md); then a
        # scenario that needs an op, a tool or a feature we lack is not run: it says so.
        check_scenario_links(scenario)
        # A foreign agent is judged by what it recorded: its tools are its own business.
        foreign = foreign_agent(scenario, settings.agent) is not None
        result.needs = scenario.needs(recordings=settings.replaying, foreign=foreign)
        if result.needs:
            result.failures.append(f"needs {'; '.join(result.needs)}")
        else:
            _run(scenario, settings, result, agents)
    except (DshError, OSError, ValueError) as exc:
        result.failures.insert(0, f"{type(exc).__name__}: {exc}")
        refused = isinstance(exc, _REFUSALS)
        if settings.mode == "replay" and settings.seed_slice and not result.needs and not refused:
            # No outputs to keep, but review must say this replay failed, and why. (A
            # scenario refused for its files is left byte for byte as it was: SECURITY.md.)
            other = foreign_agent(scenario, settings.agent)
            command = other.command if other is not None else None
            note = keep_failure(scenario, store, result.failures, command)
            result.failures.extend([note] if note else [])
    # The last guard: a failure quotes fixtures and agent output, which must not carry a key
    # onto a terminal or a CI log.
    literals = [settings.key] if settings.key else []
    result.failures = [redact(f, literals) for f in result.failures]
    result.seconds = time.perf_counter() - started
    result.ok = not result.failures
    return result


def _unrequested_server_store(name: str, settings: SnapshotSettings) -> bool:
    if name in settings.stores:
        return False
    try:
        return not store_backend(name).embedded
    except PluginError:
        return False  # an unknown backend fails where it is opened, naming itself


def _meets_expectations(scenario: Scenario, result: ScenarioResult) -> bool:
    """Record modes: check ``expect:`` of ``snapshot.yml``; a miss writes nothing."""
    if scenario.meta is None or not scenario.meta.expect:
        return True
    result.missed = check_expectations(scenario.meta.expect, result.logs)
    result.failures.extend(f"expectation missed: {m}" for m in result.missed)
    return not result.missed


def _run(
    scenario: Scenario,
    settings: SnapshotSettings,
    result: ScenarioResult,
    agents: WarmAgents | None,
) -> None:
    # A scenario arrives in a pull request: it is scanned before anything of it runs, in
    # every mode (SECURITY.md); run_scenario has already refused links leading out.
    literals = [settings.key] if settings.key else []
    allowlist = scenario.meta.secrets_allowlist if scenario.meta is not None else ()
    # Bounded by --timeout like every wait of the run (the scan is linear, but a folder may
    # be large).
    findings = scan_folder(scenario.path, allowlist, literals, timeout=settings.timeout)
    if findings:
        result.failures.extend(f"key scan: {f}" for f in findings)
        return
    if _unrequested_server_store(result.store, settings):
        # snapshot.yml may pin a store, but a server is a host resource the user points the
        # gate at, never a pull request: a server store runs only when asked for.
        result.failures.append(
            f"snapshot.yml pins the server store {result.store!r}, which the gate "
            f"reaches only when asked for (--store {result.store}): not run"
        )
        return
    # One bound for the whole run, however often the agent speaks (each wait has its own,
    # --timeout): a trickling agent would otherwise hold the gate for ever (red team F8).
    deadline = time.monotonic() + settings.run_budget
    tmp = Path(tempfile.mkdtemp(prefix="dsh-snap-")).resolve()
    # What the run stored goes with it, wherever its store keeps it (a server store's
    # namespace too, not only the folder below).
    run_scope = contextlib.ExitStack()
    try:
        cwd, root = tmp / "cwd", tmp / "sessions"
        run_scope.enter_context(store_run(result.store, root))
        if scenario.workspace is not None:
            copy_workspace(scenario.workspace, cwd)
        else:
            cwd.mkdir()
        check_step_paths(scenario, cwd)
        root.mkdir()
        # The agent's temp dir (its commands' private home and tmp, spill files) is the run's:
        # removed with it even when the agent is killed before its own clean-up runs.
        (tmp / "tmp").mkdir()
        env = {
            "TMPDIR": str(tmp / "tmp"),
            "DSH_SESSIONS_ROOT": str(root),
            "DSH_STORE": result.store,
            "DSH_LOOP_PROFILE": settings.loop or scenario.loop,
        }
        if scenario.meta is not None and scenario.meta.max_delegation_depth is not None:
            env["DSH_MAX_DELEGATION_DEPTH"] = str(scenario.meta.max_delegation_depth)
        replaying = settings.replaying or scenario.authored
        # Recorded commands run confined and without network, in every mode. The network is
        # the user's to give, never a scenario's (a pull request writes snapshot.yml): only a
        # live `record` run with DSH_BASH_NETWORK=1 gives it, to the scenarios that ask for it
        # (bash_network: true). A scripted record (the model is the scenario's own script)
        # never does.
        network = (
            settings.mode == "record"
            and scenario.meta is not None
            and scenario.meta.bash_network
            and os.environ.get(BASH_NETWORK_ENV, "").strip().lower() in ("1", "true", "yes")
        )
        hidden = hidden_from_commands(scenario.path, Path.cwd())
        sandbox_mode: Literal["strict", "warn"] = (
            "strict" if os.environ.get("CI") == "true" else "warn"
        )
        env |= {
            "DSH_SANDBOX": sandbox_mode,
            "DSH_SANDBOX_NETWORK": "allow" if network else "deny",
            # The checkout the scenario (and the gate) are in: its .env and .git are hidden.
            "DSH_SANDBOX_HIDE": os.pathsep.join(hidden),
        }
        # Our agent confines itself (after its fork, or through the launcher of a fresh
        # interpreter): a replay's model is a file, so it gets no network at all; a server
        # store must still be reached (TCP or its socket). It writes only in the run's temp
        # dir (cwd, sessions, TMPDIR, the replay report) and reads the scenario folder,
        # nothing else of the checkout.
        embedded = store_backend(result.store).embedded
        confinement = ProcessConfinement(
            network=not (replaying and embedded),
            unix_sockets=not embedded,
            mode=sandbox_mode,
            writable=(str(tmp),),
            readable=(str(scenario.path.resolve()),),
            hide=tuple(hidden),
        )
        replay = replay_settings(scenario, tmp, settings) if replaying else None
        foreign = foreign_agent(scenario, settings.agent)
        model: ForeignModel | None = None
        with contextlib.ExitStack() as stack:
            if foreign is not None:
                # Its model calls go through dsh-llm-proxy, which writes the replay report.
                model = stack.enter_context(
                    foreign_model(
                        foreign,
                        scenario,
                        replaying=replaying,
                        scripted=settings.mode == "record-scripted",
                        store=result.store,
                        tmp=tmp,
                        api_key=settings.key,
                        timeout=settings.timeout,
                        cwd=cwd,
                        keep_answers=settings.mode == "record-accept",
                        hide=hidden,
                    )
                )
            elif settings.mode == "record-accept":
                raise AgentError(
                    "--keep-answers records a foreign agent's (agent:) new requests with its "
                    "recorded answers; our agent's scenarios are recorded again (record "
                    "--scripted or record)"
                )
            elif replay is not None:
                # a live recording's drift check asks for the settings it was made with
                env |= replay_env(replay) | recorded_provider_env(scenario)
            elif settings.mode == "record-scripted":
                if scenario.script_file is None:
                    raise AgentError(
                        f"{scenario.path}: record --scripted needs {ScenarioFiles.SCRIPT} "
                        f"(or a bare-array {ScenarioFiles.OVERRIDE})"
                    )
                # The live provider's profile, played by the scripted server: the agent's
                # variables come from that provider's settings model, whatever its prefix.
                provider = live_provider()
                base = stack.enter_context(
                    _scripted_server(scenario.script_file, tmp, settings.timeout, provider.name)
                )
                env |= scripted_env(provider, base)
            else:
                provider = live_provider()
                if not settings.key and key_name(provider) is not None:
                    raise AgentError(f"record needs {key_name(provider)}")
                # Every setting of the provider (model, thinking, base URL…) reaches the agent.
                env |= live_env(provider, settings.key)
            env |= dict(settings.agent_env)
            clock = scenario.meta.clock if scenario.meta is not None else None
            if model is not None:
                agent = model.start(cwd, settings.timeout, deadline)
            elif clock is not None:
                # A fixed clock preloads libfaketime: a fresh interpreter, never a warm fork
                # (a forked child keeps its parent's clock).
                command = clock_command(clock, agent_command())
                agent_env = agent_environment(env)
                agent = ScenarioAgent(
                    cwd,
                    agent_env,
                    settings.timeout,
                    command=command,
                    confinement=confinement,
                    deadline=deadline,
                )
            else:
                server = stack.enter_context(agents.lease()) if agents is not None else None
                # A scenario must not depend on what the caller exported; a replay never sees
                # a key.
                agent_env = agent_environment(env)
                agent = ScenarioAgent(
                    cwd,
                    agent_env,
                    settings.timeout,
                    fork_server=server,
                    confinement=confinement,
                    deadline=deadline,
                )
            try:
                for step in scenario.steps:
                    agent.run_step(step)
                code = agent.finish()
            except AgentError as exc:
                if model is None:
                    raise
                # A foreign agent stopped: the cause is usually the proxy's refusal (request
                # drift), buried in the agent's JSON-RPC error. Say it first, then the rest.
                raise AgentError(model.stopped_because(exc, agent.stderr_tail(800))) from None
            finally:
                agent.kill()
        exit_failure = f"the agent exited with code {code}; stderr: {agent.stderr_tail(1500)}"
        if (accepted := tmp / "accepted.json").is_file():
            result.accepted = [str(a) for a in json.loads(accepted.read_text(encoding="utf-8"))]
        # Each harvested log is parsed once: ordering, names and normalising share it.
        if model is not None:
            parsed, agent_ids = model.logs(), normalised_ids(agent.session_ids)
        else:
            parsed, agent_ids = harvest_logs(root, result.store), agent.session_ids
        result.sessions = len(parsed)
        logs, frames = normalized_outputs(
            scenario,
            parsed,
            agent.frames,
            cwds=[str(cwd)],
            session_ids=agent_ids,
            literals=model.literals if model is not None else None,
        )
        result.logs, result.frames = logs, frames
        result.usage = recording_usage(logs)
        consumed = _check_report(replay.report, result) if replay and replay.report else True
        # "Replay not consumed" is an exit code the report check has just said better.
        if code != EXIT_OK and not (code == EXIT_REPLAY_NOT_CONSUMED and not consumed):
            result.failures.append(exit_failure)
        if settings.mode == "replay":
            result.header_note = header_note(scenario.session_files)
        if settings.mode == "replay" and settings.check == "messages":
            _compare_messages(scenario, frames, result)
        elif settings.mode == "replay":
            allowances = settings.allowances
            if allowances is None:
                allowances = UPSTREAM_ALLOWANCES if scenario.meta is None else Allowances()
            ran_clean = not result.failures
            _compare(scenario, logs, frames, result, allowances)
            if settings.seed_slice:  # the proof's deliberate red is nothing to review
                agent = foreign.command if foreign is not None else None
                note = keep_pending(
                    scenario, result.store, logs, frames, result.failures, ran_clean, agent
                )
                result.failures.extend([note] if note else [])
        elif not result.failures and _meets_expectations(scenario, result):
            recording = None
            if scenario.meta is not None:
                recording = (
                    "authored"
                    if scenario.authored
                    else {"record": "live", "record-scripted": "scripted"}.get(
                        settings.mode, scenario.meta.recording
                    )
                )
            provenance = None
            if recording == "live" and settings.mode == "record":
                provider = live_provider()
                live = provider.settings_model() if provider.settings_model else None
                provenance = live_provenance(live, result.usage, provider=provider.name)
            elif recording == "live" and scenario.meta is not None:
                # A refresh replays the live recording: it is still the one made then, with
                # that model on that day, whatever the local provider settings or date say.
                provenance = scenario.meta.provenance
            result.written = write_fixtures(scenario, logs, frames, recording, literals, provenance)
    finally:
        run_scope.close()
        shutil.rmtree(tmp, ignore_errors=True)

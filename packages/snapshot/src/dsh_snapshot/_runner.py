"""Running one scenario: a fresh temp cwd and sessions root, the agent, harvest, judge.

The same run serves every mode, in three steps read top to bottom in :func:`_run`: the run's
place (its folders and the agent's environment), the model side the mode chooses
(:mod:`dsh_snapshot._model_side`: replay, scripted, live or foreign), and the outcome
(:mod:`dsh_snapshot._outcome`): ``replay`` compares and writes nothing; ``refresh`` and
``record`` write the harvested, normalised outputs back into the folder atomically.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Literal

from dsh_core import DshError
from dsh_core.plugins import DEFAULT_STORE_BACKEND, PluginError, store_backend, store_run
from dsh_llm_replay import OverrideError
from dsh_snapshot._agent import AgentError
from dsh_snapshot._confine import (
    ConfinementError,
    check_scenario_links,
    check_step_paths,
    copy_workspace,
    hidden_from_commands,
)
from dsh_snapshot._foreign import foreign_agent
from dsh_snapshot._fsafe import ConfinedPathError
from dsh_snapshot._harvest import harvest
from dsh_snapshot._keyscan import redact, scan_folder
from dsh_snapshot._model_side import DriftStop, RunPlace, model_side
from dsh_snapshot._outcome import Ending, judge, write_fixtures
from dsh_snapshot._pending import keep_failure
from dsh_snapshot._result import ScenarioResult, Verdict
from dsh_snapshot._scenario import Scenario, ScenarioError
from dsh_snapshot._settings import SnapshotSettings
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
        if isinstance(exc, DriftStop):
            result.drift = exc.drift
            result.failures.extend(d for d in exc.drift if d not in result.failures[0])
        refused = isinstance(exc, _REFUSALS)
        if settings.mode == "replay" and settings.seed_slice and not result.needs and not refused:
            # No outputs to keep, but review must say this replay failed, and why. (A
            # scenario refused for its files is left byte for byte as it was: SECURITY.md.)
            other = foreign_agent(scenario, settings.agent)
            command = other.command if other is not None else None
            note = keep_failure(scenario, store, result.failures, command, result.drift)
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


def _refused(scenario: Scenario, settings: SnapshotSettings, result: ScenarioResult) -> bool:
    """The checks before anything of the scenario runs; True (with the failure) to stop."""
    # A scenario arrives in a pull request: it is scanned before anything of it runs, in
    # every mode (SECURITY.md); run_scenario has already refused links leading out.
    literals = [settings.key] if settings.key else []
    allowlist = scenario.meta.secrets_allowlist if scenario.meta is not None else ()
    # Bounded by --timeout like every wait of the run (the scan is linear, but a folder may
    # be large).
    findings = scan_folder(scenario.path, allowlist, literals, timeout=settings.timeout)
    if findings:
        result.failures.extend(f"key scan: {f}" for f in findings)
        return True
    if _unrequested_server_store(result.store, settings):
        # snapshot.yml may pin a store, but a server is a host resource the user points the
        # gate at, never a pull request: a server store runs only when asked for.
        result.failures.append(
            f"snapshot.yml pins the server store {result.store!r}, which the gate "
            f"reaches only when asked for (--store {result.store}): not run"
        )
        return True
    return False


def _run(
    scenario: Scenario,
    settings: SnapshotSettings,
    result: ScenarioResult,
    agents: WarmAgents | None,
) -> None:
    if _refused(scenario, settings, result):
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
        run = _place(scenario, settings, result.store, tmp, agents, deadline)
        foreign = foreign_agent(scenario, settings.agent)
        side = model_side(run, foreign)
        with contextlib.ExitStack() as stack:
            agent = side.start(stack, run)
            try:
                for step in scenario.steps:
                    agent.run_step(step)
                code = agent.finish()
            except AgentError as exc:
                raise side.stopped(exc, agent) from None
            finally:
                agent.kill()
        command = foreign.command if foreign is not None else None
        ending = Ending(code, agent.stderr_tail(1500), side.report, command)
        # Each harvested log is parsed once: ordering, names and normalising share it.
        judge(run, side.harvest(agent, run), agent.frames, ending, result)
    finally:
        run_scope.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _place(
    scenario: Scenario,
    settings: SnapshotSettings,
    store: str,
    tmp: Path,
    agents: WarmAgents | None,
    deadline: float,
) -> RunPlace:
    """The run's folders and our agent's environment before its model's variables."""
    env = {
        "TMPDIR": str(tmp / "tmp"),
        "DSH_SESSIONS_ROOT": str(tmp / "sessions"),
        "DSH_STORE": store,
        "DSH_LOOP_PROFILE": settings.loop or scenario.loop,
    }
    if scenario.meta is not None and scenario.meta.max_delegation_depth is not None:
        env["DSH_MAX_DELEGATION_DEPTH"] = str(scenario.meta.max_delegation_depth)
    # Recorded commands run confined and without network, in every mode. The network is the
    # user's to give, never a scenario's (a pull request writes snapshot.yml): only a live
    # `record` run with DSH_BASH_NETWORK=1 gives it, to the scenarios that ask for it
    # (bash_network: true). A scripted record (the model is the scenario's own script) never
    # does.
    network = (
        settings.mode == "record"
        and scenario.meta is not None
        and scenario.meta.bash_network
        and os.environ.get(BASH_NETWORK_ENV, "").strip().lower() in ("1", "true", "yes")
    )
    hidden = hidden_from_commands(scenario.path, Path.cwd())
    sandbox_mode: Literal["strict", "warn"] = "strict" if os.environ.get("CI") == "true" else "warn"
    env |= {
        "DSH_SANDBOX": sandbox_mode,
        "DSH_SANDBOX_NETWORK": "allow" if network else "deny",
        # The checkout the scenario (and the gate) are in: its .env and .git are hidden.
        "DSH_SANDBOX_HIDE": os.pathsep.join(hidden),
    }
    return RunPlace(
        scenario=scenario,
        settings=settings,
        store=store,
        tmp=tmp,
        cwd=tmp / "cwd",
        root=tmp / "sessions",
        env=env,
        hidden=hidden,
        sandbox_mode=sandbox_mode,
        deadline=deadline,
        agents=agents,
    )

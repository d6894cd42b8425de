"""The model side of a scenario run: which agent runs, and where its model answers come from.

One side is chosen per run by :func:`model_side`, from the scenario and the mode:

- **replay** — our agent, the replay client over the scenario's recording (``replay``,
  ``refresh``, and every run of an authored scenario); no key, no network;
- **scripted** — our agent, the live provider's profile played by the scripted model server
  from ``model.script.json`` (``record --scripted``);
- **live** — our agent, the live provider with the user's key (``record``);
- **foreign** — another ACP agent (``agent:``), its model calls through ``dsh-llm-proxy``,
  which replays, records (scripted, live) or keeps the recorded answers (``record-accept``).

A side starts the agent, says why it stopped, and hands back what the run produced
(:class:`Harvest`); the outcome step (:mod:`dsh_snapshot._outcome`) judges that the same way
whichever side made it. A new mode is one more side here and one more branch of
:func:`model_side`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from dsh_acp_agent.testing import agent_environment
from dsh_core import ALLOW_MODEL_REQUESTS_ENV, ProcessConfinement, ScenarioFiles, SessionLog
from dsh_core.plugins import store_backend
from dsh_llm_replay import ReplaySettings
from dsh_snapshot._agent import AgentAnsweredError, AgentError, ScenarioAgent, agent_command
from dsh_snapshot._determinism import clock_command
from dsh_snapshot._foreign import ForeignAgent, ForeignModel, foreign_model, normalised_ids
from dsh_snapshot._harvest import harvest_logs
from dsh_snapshot._live import key_name, live_env, live_provider, scripted_env
from dsh_snapshot._recorded_env import recorded_provider_env
from dsh_snapshot._request_drift import drift_after_stop
from dsh_snapshot._scenario import Scenario
from dsh_snapshot._served import served_base_url
from dsh_snapshot._settings import SnapshotSettings
from dsh_snapshot._warm import WarmAgents

__all__ = [
    "DriftStop",
    "Harvest",
    "ModelSide",
    "RunPlace",
    "model_side",
    "replay_env",
    "replay_settings",
]

_EMPTY_PRIMARY = '{"type":"session","version":0,"id":"{{sessionId}}","createdAt":0}\n'


@dataclass(frozen=True, slots=True)
class RunPlace:
    """Where one run happens, and what every side is given."""

    scenario: Scenario
    settings: SnapshotSettings
    store: str
    tmp: Path
    """The run's temporary root, removed with the run."""
    cwd: Path
    root: Path
    """The sessions root our agent's store writes under."""
    env: Mapping[str, str]
    """Our agent's environment before its model's variables (store, sandbox, loop…)."""
    hidden: list[str]
    """What confined commands must not see (the checkout's ``.env`` and ``.git``…)."""
    sandbox_mode: Literal["strict", "warn"]
    deadline: float
    """The run's one bound (``time.monotonic()``), however often the agent speaks."""
    agents: WarmAgents | None = None


@dataclass(frozen=True, slots=True)
class Harvest:
    """What the run produced, as its side reads it back."""

    logs: list[SessionLog]
    session_ids: list[str]
    """The agent's session ids, to be normalised to ``{{sessionId}}``."""
    literals: Mapping[str, str] | None = None
    """Run-specific strings to normalise too (a foreign agent's private home and tmp)."""
    accepted: list[str] = field(default_factory=list[str])
    """``record-accept``: the request changes that kept their recorded answers."""
    drift: list[str] = field(default_factory=list[str])
    """A foreign agent's replay: the requests the proxy refused as differing from the
    recording (our agent's replay report says its own)."""


class DriftStop(AgentError):
    """The agent stopped mid-run after requests that differed from the recording: ``drift``
    names them, so that the failure kept for review can be accepted keeping the answers."""

    def __init__(self, message: str, drift: list[str]) -> None:
        super().__init__(message)
        self.drift = drift


class ModelSide(Protocol):
    """One mode's way of running the agent; used once, for one run."""

    @property
    def report(self) -> Path | None:
        """The replay report the run leaves (a recording must be consumed exactly), or None."""
        ...

    def start(self, stack: ExitStack, run: RunPlace) -> ScenarioAgent:
        """Start the model (its server, its proxy: closed with ``stack``) and the agent."""
        ...

    def stopped(self, error: AgentError, agent: ScenarioAgent) -> AgentError:
        """The error to report when the agent stopped mid-run, cause first."""
        ...

    def harvest(self, agent: ScenarioAgent, run: RunPlace) -> Harvest:
        """The run's session logs and what normalises them (after ``stack`` closed)."""
        ...


def model_side(run: RunPlace, foreign: ForeignAgent | None) -> ModelSide:
    """The one side this run takes: ``foreign`` when another agent runs, else ours with the
    model its mode asks for.

    Raises:
        AgentError: the mode cannot run this scenario (``--keep-answers`` for our agent, no
            script for ``record --scripted``, no key for ``record``).
    """
    settings, scenario = run.settings, run.scenario
    if foreign is not None:
        return ForeignSide(foreign, replaying=settings.replaying or scenario.authored)
    if settings.mode == "record-accept":
        raise AgentError(
            "--keep-answers records a foreign agent's (agent:) new requests with its "
            "recorded answers; for our agent's scenarios, accept the failing replay "
            f"(dsh-snapshot accept {scenario.path}) or refresh it: both keep the recorded "
            "answers"
        )
    if settings.replaying or scenario.authored:
        return OurAgent(ReplayModel(replay_settings(scenario, run.tmp, settings)))
    if settings.mode == "record-scripted":
        if scenario.script_file is None:
            raise AgentError(
                f"{scenario.path}: record --scripted needs {ScenarioFiles.SCRIPT} "
                f"(or a bare-array {ScenarioFiles.OVERRIDE})"
            )
        return OurAgent(ScriptedModel(scenario.script_file))
    provider = live_provider()
    if not settings.key and key_name(provider) is not None:
        raise AgentError(f"record needs {key_name(provider)}")
    return OurAgent(LiveModel())


# --- our agent, and its three models --------------------------------------------------------


class OurModel(Protocol):
    """Where our agent's model answers come from: what its environment says about it."""

    @property
    def network(self) -> bool:
        """Whether the agent needs the network to reach its model."""
        ...

    @property
    def report(self) -> Path | None: ...

    def env(self, stack: ExitStack, run: RunPlace) -> dict[str, str]:
        """The agent's model variables (a server it needs is started on ``stack``)."""
        ...


@dataclass(frozen=True, slots=True)
class OurAgent:
    """``dsh-acp-agent`` with one of its models: forked from a warm agent, or a fresh
    interpreter when the scenario fixes the clock."""

    model: OurModel

    @property
    def report(self) -> Path | None:
        return self.model.report

    def start(self, stack: ExitStack, run: RunPlace) -> ScenarioAgent:
        settings = run.settings
        env = {**run.env, **self.model.env(stack, run), **dict(settings.agent_env)}
        # A scenario must not depend on what the caller exported; a replay never sees a key.
        agent_env = agent_environment(env)
        # Our agent confines itself (after its fork, or through the launcher of a fresh
        # interpreter): a replay's model is a file, so it gets no network at all; a server
        # store must still be reached (TCP or its socket). It writes only in the run's temp
        # dir (cwd, sessions, TMPDIR, the replay report) and reads the scenario folder,
        # nothing else of the checkout.
        embedded = store_backend(run.store).embedded
        confinement = ProcessConfinement(
            network=self.model.network or not embedded,
            unix_sockets=not embedded,
            mode=run.sandbox_mode,
            writable=(str(run.tmp),),
            readable=(str(run.scenario.path.resolve()),),
            hide=tuple(run.hidden),
        )
        clock = run.scenario.meta.clock if run.scenario.meta is not None else None
        if clock is not None:
            # A fixed clock preloads libfaketime: a fresh interpreter, never a warm fork (a
            # forked child keeps its parent's clock); confined by the same plan all the same.
            command = clock_command(clock, agent_command())
            return ScenarioAgent(
                run.cwd,
                agent_env,
                settings.timeout,
                command=command,
                confinement=confinement,
                deadline=run.deadline,
            )
        server = stack.enter_context(run.agents.lease()) if run.agents is not None else None
        return ScenarioAgent(
            run.cwd,
            agent_env,
            settings.timeout,
            fork_server=server,
            confinement=confinement,
            deadline=run.deadline,
        )

    def stopped(self, error: AgentError, agent: ScenarioAgent) -> AgentError:
        if self.report is None or not isinstance(error, AgentAnsweredError):
            return error  # a hung or crashed agent is not waited for again
        # A drift before the step failed (a call more than recorded) is what accept must
        # name: the agent's replay report says, once it has exited.
        drift = drift_after_stop(agent.finish, self.report)
        return DriftStop(str(error), drift) if drift else error

    def harvest(self, agent: ScenarioAgent, run: RunPlace) -> Harvest:
        return Harvest(harvest_logs(run.root, run.store), agent.session_ids)


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


@dataclass(frozen=True, slots=True)
class ReplayModel:
    """The replay client over the scenario's recording; the run's report says it was consumed."""

    replay: ReplaySettings
    network: bool = False

    @property
    def report(self) -> Path | None:
        return self.replay.report

    def env(self, stack: ExitStack, run: RunPlace) -> dict[str, str]:
        # a live recording's drift check asks for the settings it was made with
        return replay_env(self.replay) | recorded_provider_env(run.scenario)


@dataclass(frozen=True, slots=True)
class ScriptedModel:
    """The live provider's profile, played by the scripted model server from the scenario's
    script: the agent's variables come from that provider's settings model, whatever its
    prefix."""

    script: Path
    network: bool = True
    report: Path | None = None

    def env(self, stack: ExitStack, run: RunPlace) -> dict[str, str]:
        provider = live_provider()
        server = _scripted_server(self.script, run.tmp, run.settings.timeout, provider.name)
        return scripted_env(provider, stack.enter_context(server))


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


@dataclass(frozen=True, slots=True)
class LiveModel:
    """The live provider with the user's key: every setting of the provider (model,
    thinking, base URL…) reaches the agent."""

    network: bool = True
    report: Path | None = None

    def env(self, stack: ExitStack, run: RunPlace) -> dict[str, str]:
        return live_env(live_provider(), run.settings.key)


# --- another agent ----------------------------------------------------------------------------


@dataclass(slots=True)
class ForeignSide:
    """Another ACP agent, always a fresh confined process; its model calls go through
    ``dsh-llm-proxy``, which writes the replay report when it replays."""

    agent: ForeignAgent
    replaying: bool
    model: ForeignModel | None = None
    tmp: Path | None = None

    @property
    def report(self) -> Path | None:
        # written by foreign_model when its block ends (the run's stack closes first)
        return self.tmp / "replay-report.json" if self.replaying and self.tmp else None

    def start(self, stack: ExitStack, run: RunPlace) -> ScenarioAgent:
        settings = run.settings
        self.tmp = run.tmp
        self.model = stack.enter_context(
            foreign_model(
                self.agent,
                run.scenario,
                replaying=self.replaying,
                scripted=settings.mode == "record-scripted",
                store=run.store,
                tmp=run.tmp,
                api_key=settings.key,
                timeout=settings.timeout,
                cwd=run.cwd,
                keep_answers=settings.mode == "record-accept",
                hide=run.hidden,
            )
        )
        return self.model.start(run.cwd, settings.timeout, run.deadline)

    def stopped(self, error: AgentError, agent: ScenarioAgent) -> AgentError:
        # The cause is usually the proxy's refusal (request drift), buried in the agent's
        # JSON-RPC error. Say it first, then the rest.
        assert self.model is not None  # started
        why = self.model.stopped_because(error, agent.stderr_tail(800))
        drift = self.model.drift()
        return DriftStop(why, drift) if drift else AgentError(why)

    def harvest(self, agent: ScenarioAgent, run: RunPlace) -> Harvest:
        assert self.model is not None  # started
        refused = self.model.route.refusals()
        if refused:  # the agent went on without the refused call: the recording is not its run
            raise AgentError(str(refused[0]))
        accepted: list[Any] = []
        if (path := run.tmp / "accepted.json").is_file():
            accepted = json.loads(path.read_text(encoding="utf-8"))
        return Harvest(
            self.model.logs(),
            normalised_ids(agent.session_ids),
            self.model.literals,
            [str(a) for a in accepted],
            self.model.drift(),
        )

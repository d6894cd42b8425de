"""Any ACP agent in the snapshot tier: its model calls go through a ``dsh-llm-proxy``.

A scenario whose ``snapshot.yml`` names an ``agent:`` (or a run given ``--agent CMD``) runs that
agent instead of ours. The gate process serves every such run from one ``dsh-llm-proxy``
(:func:`dsh_llm_proxy.shared_hub`, started on the first foreign run): each run gets a route of
its own on it, and the agent's model base URL (the variable ``agent_base_url_env`` names) points
at that route:

- ``replay`` / ``refresh``: the committed ``session.jsonl`` / ``session.N.jsonl`` are staged
  into a fresh proxy root and the run's route replays them keylessly; at the end its consumption
  report is the run's replay report (``assert_consumed``, request mismatches). The proxy writes
  nothing in replay, so the logs of the run are the committed ones: only the stdout frames are
  compared, and the logs are checked by being consumed exactly.
- ``record-scripted``: the proxy records against the scripted model server (in this process,
  ``model.script.json``) with a placeholder key.
- ``record``: the proxy records against the live API with the key held by the gate's proxy
  only; the agent gets a base URL and never a key.
- ``record-accept`` (``--keep-answers``): keyless; the run's route records against a second
  route that replays the committed recording and answers a changed request (a new prompt,
  system prompt, tools) with the recorded answer instead of refusing it. The new requests are
  written with the old answers: a request-side change accepted without asking the model.

The recorded proxy root is read back through the proxy's own ``recorded_logs`` (core's log
reader over whichever store it holds) and becomes the scenario's session fixtures, ordered as
the agent's own harvest orders them.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import sys
import urllib.parse
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import TypeAdapter, ValidationError

from dsh_core import (
    CWD,
    ConfinedCommand,
    CreateOptions,
    DshError,
    SandboxSettings,
    ScenarioFiles,
    SessionLog,
    SessionMeta,
    ToolSandbox,
    creation_order,
    read_log_text,
    tool_environment,
)
from dsh_llm_proxy import RecordPolicy, Scrub, open_recording_root, recorded_logs
from dsh_snapshot._agent import AgentError, ScenarioAgent
from dsh_snapshot._agentspec import (
    BASE_URL,
    DEFAULT_BASE_URL_ENV,
    AgentArgv,
    EnvName,
    check_base_url_env,
)
from dsh_snapshot._determinism import HOME, TMP, clock_command
from dsh_snapshot._fsafe import read_file_text
from dsh_snapshot._keep_answers import NO_FIT
from dsh_snapshot._live import LiveSettings, key_name, live_model, live_provider, live_upstream
from dsh_snapshot._scenario import Scenario

if TYPE_CHECKING:
    from dsh_core.plugins import ModelProvider
    from dsh_llm_proxy import ProxyHub, ProxyRoute

__all__ = [
    "ForeignAgent",
    "add_agent_arguments",
    "agent_from_arguments",
    "ForeignModel",
    "foreign_agent",
    "check_not_recorded_with_override",
    "foreign_model",
    "normalised_ids",
    "private_paths",
    "recording_logs",
    "stage_recording",
]

# An agent-chosen session id shorter than this ("0", "1") is not normalised: replacing such a
# string everywhere would rewrite unrelated text ("2.0"). UUIDs are normalised anyway.
_MIN_NORMALISED_ID = 8


@dataclass(frozen=True, slots=True)
class ForeignAgent:
    """Another ACP agent to run instead of ours.

    Attributes:
        command: argv; ``{python}`` and ``{scenario}`` are expanded at run time.
        base_url_env: the variable through which it takes its model base URL.
        env: fixed variables it needs (e.g. a placeholder key its SDK insists on).
        from_user: the command is the user's own (``--agent``), not a scenario's: the absolute
            paths among its arguments are made readable inside the sandbox (a script in a
            folder the sandbox hides, such as ``/tmp``).
    """

    command: tuple[str, ...]
    base_url_env: str = DEFAULT_BASE_URL_ENV
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    from_user: bool = False

    @classmethod
    def from_command_line(
        cls, command: str, base_url_env: str = DEFAULT_BASE_URL_ENV
    ) -> ForeignAgent:
        """``--agent CMD`` (a shell-quoted command line) and ``--agent-base-url-env NAME``.

        Raises:
            ValueError: the command is empty or unparsable, or the name is not a variable name.
        """
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"--agent {command!r}: {exc}") from None
        checked: list[str] = _validated(AgentArgv, argv, f"--agent {command!r}")
        name: str = _validated(EnvName, base_url_env, f"--agent-base-url-env {base_url_env!r}")
        check_base_url_env(name)
        return cls(tuple(checked), name, from_user=True)

    def argv(self, scenario: Path) -> list[str]:
        """The command with ``{python}`` and ``{scenario}`` expanded."""
        return [
            arg.replace("{python}", sys.executable).replace("{scenario}", str(scenario))
            for arg in self.command
        ]

    def environment(self, base_url: str, home: str, tmp: str) -> dict[str, str]:
        """The agent's whole environment, by allow-list: ``PATH``, ``LANG``, ``LANGUAGE``,
        ``LC_*``, ``TERM``, ``TZ`` of the caller (nothing else of it: no credential of any
        provider or CI), the private ``home`` and ``tmp``, then ``env`` (checked when
        ``snapshot.yml`` was read) with ``{base_url}`` in its values replaced by the base URL,
        and the base URL. (An agent configured by one JSON variable, such as Mistral Vibe's
        ``VIBE_PROVIDERS``, takes the proxy's URL inside it.)"""
        env = tool_environment(home, tmp)
        own = {name: value.replace(BASE_URL, base_url) for name, value in self.env.items()}
        return env | own | {self.base_url_env: base_url}


def _validated(kind: Any, value: object, where: str) -> Any:
    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError as exc:
        raise ValueError(f"{where}: {exc.errors()[0]['msg']}") from None


def foreign_agent(scenario: Scenario, override: ForeignAgent | None = None) -> ForeignAgent | None:
    """The foreign agent a run uses: ``override`` (``--agent``), else ``snapshot.yml``'s.

    ``--agent`` replaces the command only: the scenario's ``agent_env`` (the placeholder key
    and model its SDK needs) still applies, under the override's own settings.
    """
    meta = scenario.meta
    if override is not None:
        kept = dict(meta.agent_env or {}) if meta is not None else {}
        kept.pop(override.base_url_env, None)  # the gate sets that one
        return dataclasses.replace(override, env=kept | dict(override.env))
    if meta is None or meta.agent is None:
        return None
    return ForeignAgent(
        tuple(meta.agent), meta.agent_base_url_env or DEFAULT_BASE_URL_ENV, meta.agent_env or {}
    )


# --- proxy roots ----------------------------------------------------------------------------


def recording_logs(root: Path, store: str | None = None) -> list[SessionLog]:
    """Every session of a proxy recording root, exactly as written, in harvest order (primary
    first, then children by ``createdAt``).

    Raises:
        DshError: a log cannot be read (naming the file and line).
    """
    return creation_order([log for _, log in recorded_logs(root, store)])


def stage_recording(session_files: Sequence[Path], root: Path, store: str) -> None:
    """Write a scenario's session fixtures into an empty proxy root the proxy can replay.

    Committed fixtures are normalised (every id ``{{sessionId}}``, ``createdAt`` 0), so each
    gets a fresh id and its fixture index as ``createdAt``: the proxy binds sessions in that
    order, which is the order they were recorded in. A child's ``parentSession`` becomes the
    primary (replay through the proxy binds by first call, never by parent).

    Raises:
        DshError: a fixture cannot be read.
    """
    opened = open_recording_root(root, store)
    try:
        for index, path in enumerate(session_files):
            log = read_log_text(read_file_text(path), str(path))
            header = log.header
            meta = SessionMeta(
                created_at=index,
                parent_session="s0000" if header.parent_session and index else None,
                seed_length=header.seed_length,
                origin=header.origin,
                delegation_depth=header.delegation_depth,
            )
            opened.create(CreateOptions(f"s{index:04d}", log.events, meta)).close()
    finally:
        opened.close()


@dataclass(frozen=True, slots=True)
class ForeignModel:
    """The model side of a foreign agent's run, as the runner uses it.

    Attributes:
        agent: the foreign agent.
        scenario: the scenario being run.
        route: the run's route on the process's proxy.
        root: the route's recording root (staged fixtures in replay, the recording otherwise).
        replaying: whether the proxy replays.
    """

    agent: ForeignAgent
    scenario: Scenario
    route: ProxyRoute
    root: Path
    replaying: bool
    sandbox: ToolSandbox = field(default_factory=ToolSandbox)
    confined: list[ConfinedCommand] = field(default_factory=list[ConfinedCommand])
    """The agents started (their relays are closed when the run ends)."""
    cwd: Path | None = None
    """The run's cwd: the private paths as seen from it are normalised too."""
    kept: ProxyRoute | None = None
    """``record-accept``: the route replaying the committed recording (the upstream)."""
    store: str | None = None
    """The store backend the run chose for ``root`` (a server store is read only when chosen)."""

    @property
    def base_url(self) -> str:
        """What the agent's base-URL variable holds: the run's route on the proxy."""
        return self.route.base_url

    def start(self, cwd: Path, timeout: float, deadline: float | None = None) -> ScenarioAgent:
        """Start the agent (always a fresh process: it is not ours to fork warm) in the sandbox
        our ``bash`` tool runs in (SECURITY.md): the host read-only, only the run's cwd and a
        private home and temp dir writable, no terminal, nothing outliving it, and a network of
        its own in which only the proxy's port answers (relayed to the proxy).

        Raises:
            SandboxUnavailableError: strict (CI) and bubblewrap cannot run here.
            ClockUnavailableError: ``clock:`` is set and ``faketime`` is not installed.
        """
        env = self.agent.environment(self.base_url, str(self.sandbox.home), str(self.sandbox.tmp))
        port = urllib.parse.urlsplit(self.base_url).port
        argv = self.agent.argv(self.scenario.path)
        readable = [str(self.scenario.path)]
        if self.agent.from_user:
            readable += [arg for arg in argv[1:] if os.path.isabs(arg) and os.path.exists(arg)]
        # Under libfaketime when the scenario fixes the clock (faketime runs inside).
        clock = self.scenario.meta.clock if self.scenario.meta is not None else None
        confined = self.sandbox.confine(
            clock_command(clock, argv), str(cwd), env=env, readable=readable, forward_port=port
        )
        self.confined.append(confined)
        try:
            return ScenarioAgent(cwd, confined.env, timeout, command=confined.argv,
                                 pass_fds=confined.pass_fds, deadline=deadline)  # fmt: skip
        finally:
            confined.started()

    def stopped_because(self, error: Exception, stderr: str) -> str:
        """Why the agent stopped, cause first: the replaying proxy's problems (a request that
        drifted from the recording), then the agent's own error and its stderr's tail."""
        problems: list[str] = []
        replay = self.route if self.replaying else self.kept
        if replay is not None:
            with contextlib.suppress(DshError):
                problems = list(replay.report().problems)
        if problems and self.kept is not None:
            problems[0] = f"{NO_FIT}: {problems[0]}"
        problems = [*map(str, self.route.refusals()), *problems]
        if not problems:
            return f"the agent stopped: {error}; its stderr ends: {stderr}"
        # The proxy's words are the cause; the agent's JSON-RPC error and its traceback only
        # repeat them, escaped: a person reads the cause and the last lines the agent wrote.
        tail = " | ".join([line.strip() for line in stderr.splitlines() if line.strip()][-2:])
        return f"{problems[0]} (the agent stopped on it; its stderr ends: {tail})"

    def drift(self) -> list[str]:
        """Replay: the requests the proxy refused as differing from the recorded ones (a
        changed prompt, system prompt or tools), which ``accept`` can take keylessly."""
        return self.route.mismatches() if self.replaying else []

    @property
    def literals(self) -> dict[str, str]:
        """The run's private home and temp dir and their placeholders (the cwd is the
        normaliser's own), absolute and relative to the cwd (see :func:`private_paths`)."""
        return private_paths(self.sandbox, self.cwd)

    def logs(self) -> list[SessionLog]:
        """The run's session logs: the committed fixtures in replay (the proxy writes none),
        the proxy's recording otherwise."""
        if self.replaying:
            files = self.scenario.session_files
            return [read_log_text(read_file_text(p), str(p)) for p in files]
        return recording_logs(self.root, self.store)


def private_paths(sandbox: ToolSandbox, cwd: Path | None) -> dict[str, str]:
    """The run's private home and temp dir → ``{{home}}`` / ``{{tmp}}``: each absolute, and
    as the cwd reaches it (``../dsh-tool-x1y2/home``), which is how an agent that shows paths
    relative to its workspace names them (Qwen Code's "Context from: ../…/.qwen/…"). The
    relative form holds the random folder name, so it is as run-specific as the absolute one;
    in replay, putting back the longer absolute path first gives the live answer a path that
    works from anywhere."""
    paths = {str(sandbox.home): HOME, str(sandbox.tmp): TMP}
    if cwd is not None:
        for value, placeholder in list(paths.items()):
            relative = os.path.relpath(value, cwd)
            if relative.startswith(".."):
                paths[relative] = placeholder
    return paths


def normalised_ids(session_ids: Sequence[str]) -> list[str]:
    """The agent session ids to replace with ``{{sessionId}}`` (see ``_MIN_NORMALISED_ID``)."""
    return [s for s in session_ids if len(s) >= _MIN_NORMALISED_ID]


@contextlib.contextmanager
def foreign_model(
    agent: ForeignAgent,
    scenario: Scenario,
    *,
    replaying: bool,
    scripted: bool,
    store: str,
    tmp: Path,
    api_key: str | None,
    timeout: float,
    cwd: Path | None = None,
    hide: Sequence[str] = (),
    keep_answers: bool = False,
) -> Generator[ForeignModel, None, None]:
    """Start the proxy for a foreign agent's run; in replay, write its consumption report to
    ``tmp/replay-report.json`` when the block ends (the runner checks it as ours); with
    ``keep_answers``, record against the committed recording (see the module docstring) and
    write the request changes answered anyway to ``tmp/accepted.json``.

    Raises:
        AgentError: no key for a live recording; no ``model.script.json`` for a scripted one;
            the proxy did not start; the new requests did not use the recorded answers
            exactly (more, fewer or other calls: those need the model).
    """
    check_not_recorded_with_override(scenario)
    root = tmp / "proxy-root"
    root.mkdir()
    # The agent's command comes from the scenario (untrusted, SECURITY.md): it runs in the
    # bash tool's sandbox, reaching only the proxy.
    mode = "strict" if os.environ.get("CI") == "true" else "warn"
    settings = SandboxSettings(
        sandbox=mode, sandbox_network="deny", sandbox_hide=os.pathsep.join(hide)
    )
    sandbox = ToolSandbox(settings, root=tmp)
    kept: ProxyRoute | None = None
    with contextlib.ExitStack() as stack:
        if replaying:
            stage_recording(scenario.session_files, root, store)
            route = _hub().replay(root, scrub=_scrub(scenario, sandbox, cwd), store=store)
        else:
            # The record provider's own API root and key variable (DSH_RECORD_PROVIDER).
            provider = live_provider()
            key = api_key
            # Live, the key is the maintainer's: the calls the agent may make are bounded and
            # the model is the configured one. Keyless upstreams get the default bounds.
            policy: RecordPolicy | None = None
            if keep_answers:
                kept = stack.enter_context(
                    _kept_answers(scenario, store, tmp, _scrub(scenario, sandbox, cwd))
                )
                upstream, key = kept.base_url, "kept"
            elif scripted:
                upstream, key = stack.enter_context(_scripted_upstream(scenario)), "scripted"
            else:
                upstream = live_upstream(provider)
                policy = _live_policy(provider)
            if not key:
                raise AgentError(
                    f"record needs {key_name(provider) or 'a key'} (it goes to the proxy only)"
                )
            route = _hub().record(root, upstream=upstream, api_key=key, store=store, policy=policy)
        stack.enter_context(route)
        model = ForeignModel(
            agent, scenario, route, root, replaying, sandbox, cwd=cwd, kept=kept, store=store
        )
        stack.callback(lambda: [c.close() for c in model.confined])
        yield model
        if replaying:
            report = route.report().as_json()
            (tmp / "replay-report.json").write_text(json.dumps(report), encoding="utf-8")


def _live_policy(provider: ModelProvider) -> RecordPolicy:
    """What a live recording forwards with the key (``LiveSettings``; the live model only)."""
    settings = LiveSettings()
    return RecordPolicy(
        max_in_flight=settings.max_in_flight,
        max_calls=settings.max_calls,
        max_tokens=settings.max_tokens,
        model=live_model(provider),
    )


def shared_hub() -> ProxyHub:
    """:func:`dsh_llm_proxy.shared_hub`, imported on the first foreign run: the server stack
    (uvicorn, starlette, httpx: ~0.1 CPU-s) is no part of a gate that runs none."""
    from dsh_llm_proxy import shared_hub as start  # noqa: PLC0415 - see above

    return start()


def _hub() -> ProxyHub:
    """The process's proxy (one serves every foreign run of a gate or a pytest worker)."""
    try:
        return shared_hub()
    except (DshError, OSError) as exc:
        raise AgentError(f"dsh-llm-proxy did not start: {exc}") from None


def _scrub(scenario: Scenario, sandbox: ToolSandbox, cwd: Path | None) -> Scrub:
    """The replaying route's literals and scrubbers: the run's paths become the placeholders
    the recording holds (and are put back into its answers), then the scenario's own
    scrubbers, on both sides of each request comparison."""
    paths = [(name, value) for value, name in private_paths(sandbox, cwd).items()]
    if cwd is not None:
        paths.append((CWD, str(cwd)))
    scrubbers = scenario.meta.scrub if scenario.meta is not None else ()
    try:
        return Scrub.build(paths, [(s.placeholder, s.pattern) for s in scrubbers])
    except ValueError as exc:
        raise AgentError(f"{scenario.path}: dsh-llm-proxy: {exc}") from None


@contextlib.contextmanager
def _kept_answers(
    scenario: Scenario, store: str, tmp: Path, scrub: Scrub
) -> Generator[ProxyRoute, None, None]:
    """A route replaying the committed recording that answers changed requests anyway
    (``accept_drift``); yields it (its base URL is the recording route's upstream). When the block
    ends, the recording must have been consumed exactly: a run that asked more, fewer or
    other calls than were recorded has no recorded answer to keep."""
    root = tmp / "proxy-recorded"
    root.mkdir()
    stage_recording(scenario.session_files, root, store)
    with _hub().replay(root, scrub=scrub, accept_drift=True, store=store) as route:
        yield route
        problems, accepted = list(route.report().problems), route.accepted()
    if problems:
        raise AgentError(
            f"{NO_FIT} ({problems[0]}): they need "
            f"the model; record again: dsh-snapshot record --scripted {scenario.path} "
            f"({ScenarioFiles.SCRIPT}) or dsh-snapshot record {scenario.path} (live)"
        )
    (tmp / "accepted.json").write_text(json.dumps(accepted), encoding="utf-8")


@contextlib.contextmanager
def _scripted_upstream(scenario: Scenario) -> Generator[str, None, None]:
    from dsh_scripted_server import (  # noqa: PLC0415 - record --scripted only
        ScriptedModelServer,
        load_script_file,
    )

    if scenario.script_file is None:
        raise AgentError(f"{scenario.path}: record --scripted needs {ScenarioFiles.SCRIPT}")
    with ScriptedModelServer() as server:
        for session in load_script_file(scenario.script_file):
            server.add_session(session)
        yield server.base_url


def check_not_recorded_with_override(scenario: Scenario) -> None:
    """A foreign agent's scenario replays its recording only: ``replay.override.json`` (which
    scripts our agent's client) does not apply.

    Raises:
        DshError: the folder has one.
    """
    if scenario.override_file is not None:
        raise DshError(
            f"{scenario.override_file}: a scenario with agent: replays through dsh-llm-proxy, "
            "which does not read replay.override.json: remove it"
        )


# --- the command line ------------------------------------------------------------------------


def _agent_argument(text: str) -> tuple[str, ...]:
    try:
        return ForeignAgent.from_command_line(text).command
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--agent ")) from None


def _env_name_argument(text: str) -> str:
    try:
        return str(_validated(EnvName, text, repr(text)))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}: not an environment variable name") from None


def add_agent_arguments(command: argparse.ArgumentParser) -> None:
    """``--agent CMD`` and ``--agent-base-url-env NAME`` on a running subcommand."""
    command.add_argument(
        "--agent",
        type=_agent_argument,
        default=None,
        metavar="CMD",
        help="run this ACP agent (a shell-quoted command line) instead of ours, its model "
        "calls recorded and replayed through dsh-llm-proxy; overrides snapshot.yml's agent:",
    )
    command.add_argument(
        "--agent-base-url-env",
        type=_env_name_argument,
        default=None,
        metavar="NAME",
        help=f"the variable through which --agent takes its model base URL "
        f"(default {DEFAULT_BASE_URL_ENV})",
    )


def agent_from_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> ForeignAgent | None:
    """The ``--agent`` of parsed arguments, or ``None``; a usage error (exit 2) when
    ``--agent-base-url-env`` comes without ``--agent``."""
    command = cast(tuple[str, ...] | None, getattr(args, "agent", None))
    name = cast(str | None, getattr(args, "agent_base_url_env", None))
    if command is None:
        if name is not None:
            parser.error("--agent-base-url-env needs --agent (it names the agent's variable)")
        return None
    return ForeignAgent(command, name or DEFAULT_BASE_URL_ENV, from_user=True)

"""The one snapshot engine: :class:`SnapshotSettings` in, one result per run out.

The ``dsh-snapshot`` CLI, the pytest plugin and ``tools/compat.py`` are front ends: each builds
a :class:`SnapshotSettings` and calls :func:`run` (the CLI and compat let :func:`select` find the
scenarios first, to report malformed ones and to describe them). What they must all say the
same way is here too: whether a live record may start (:func:`record_preflight`) and the
summary line of a batch (:class:`Tally`, :func:`summary_line`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_attempt, wait_none

from dsh_snapshot._discover import BrokenScenario, discover_each
from dsh_snapshot._result import ScenarioResult, Verdict
from dsh_snapshot._runner import run_scenario
from dsh_snapshot._scenario import Scenario
from dsh_snapshot._settings import SnapshotSettings
from dsh_snapshot._warm import WarmAgents

__all__ = [
    "RecordPreflight",
    "Selection",
    "Tally",
    "record_key",
    "record_preflight",
    "run",
    "select",
    "summary_line",
    "will_retry",
]


@dataclass(frozen=True, slots=True)
class Selection:
    """The scenarios :func:`select` found: the loadable ones, and the malformed ones (each
    reported as one failed row, never run)."""

    scenarios: list[Scenario]
    broken: list[BrokenScenario]


def _chosen(name: str, names: Sequence[str]) -> bool:
    return not names or any(n.casefold() in name.casefold() for n in names)


def select(settings: SnapshotSettings) -> Selection:
    """Every scenario at or below ``settings.paths`` whose name matches ``settings.names``.

    Raises:
        ScenarioError: a path does not exist (nothing to run at all), is reached through a
            link, or discovery took longer than ``settings.timeout``.
    """
    # Bounded by --timeout like every wait of a run: a tree built to be walked for ever (or a
    # huge one) ends the command with that error instead.
    scenarios, broken = discover_each(settings.paths, timeout=settings.timeout)
    return Selection(
        [s for s in scenarios if _chosen(s.name, settings.names)],
        [b for b in broken if _chosen(b.name, settings.names)],
    )


def _run_one(
    scenario: Scenario,
    settings: SnapshotSettings,
    store: str,
    agents: WarmAgents | None,
) -> ScenarioResult:
    """:func:`run_scenario`, with a bug of ours costing that one run, never the batch."""
    try:
        return run_scenario(scenario, settings, store, agents)
    except Exception as exc:
        result = ScenarioResult(scenario, settings, store)
        result.failures.append(f"internal error: {exc!r}")
        return result


def _max_attempts(settings: SnapshotSettings, scenario: Scenario) -> int:
    # Only a live model answers differently when asked again; a scripted one never would.
    live = settings.mode == "record" and not scenario.authored
    return settings.retries + 1 if live else 1


def will_retry(settings: SnapshotSettings, result: ScenarioResult) -> bool:
    """Whether :func:`run` records ``result``'s scenario again: a live recording that missed
    its ``expect:``, with retries left."""
    return bool(result.missed) and result.attempts < _max_attempts(settings, result.scenario)


def _attempts(
    scenario: Scenario,
    settings: SnapshotSettings,
    store: str,
    agents: WarmAgents | None,
    on_result: Callable[[ScenarioResult], None] | None,
) -> ScenarioResult:
    """Run one pair, again while :func:`will_retry` says so; the last attempt's result."""
    attempts = 0

    def attempt() -> ScenarioResult:
        nonlocal attempts
        attempts += 1
        result = _run_one(scenario, settings, store, agents)
        result.attempts = attempts
        if on_result is not None:
            on_result(result)
        return result

    def last(state: RetryCallState) -> ScenarioResult:
        assert state.outcome is not None
        result: ScenarioResult = state.outcome.result()
        result.failures.append(
            f"still missing its expectations after {result.attempts} recordings; "
            f"the committed fixtures are untouched"
        )
        return result

    retrying = Retrying(
        stop=stop_after_attempt(_max_attempts(settings, scenario)),
        retry=retry_if_result(lambda r: bool(r.missed)),
        wait=wait_none(),
        retry_error_callback=last,
    )
    return retrying(attempt)


def _backends(scenario: Scenario, settings: SnapshotSettings) -> list[str]:
    """The store backends ``scenario`` runs on: those asked for (or its ``snapshot.yml``'s).
    A foreign agent's too: ``dsh-llm-proxy`` records into any installed backend."""
    return scenario.stores(settings.run_stores)


def run(
    settings: SnapshotSettings,
    scenarios: Sequence[Scenario] | None = None,
    on_result: Callable[[ScenarioResult], None] | None = None,
    *,
    agents: WarmAgents | None = None,
    keep_outputs: bool = True,
) -> list[ScenarioResult]:
    """Run every (scenario, store backend) pair the settings ask for; results in input order.

    Args:
        settings: what to run and how.
        scenarios: the scenarios to run; ``None`` runs ``select(settings).scenarios``
            (malformed ones are skipped: :func:`select` them first to report them).
        on_result: called with every attempt's result as it finishes (from worker threads),
            for progress; a retried recording calls it once per attempt.
        agents: warm agents to fork from, kept by the caller across calls (the pytest plugin
            keeps one per worker); ``None`` starts ``settings.jobs`` of its own for this call.
            Ignored when ``settings.cold``.
        keep_outputs: keep each run's normalised logs and frames on its result. A caller that
            only reports verdicts passes ``False``: over hundreds of runs those outputs are
            nearly all of the gate's memory (about 0.2 MiB a run), and nothing else grows.

    Threads suffice: each run's work happens in its own agent subprocess, forked from one warm
    agent per worker unless ``settings.cold``.
    """
    if scenarios is None:
        scenarios = select(settings).scenarios
    pairs: list[tuple[Scenario, str]] = [
        (scenario, store) for scenario in scenarios for store in _backends(scenario, settings)
    ]
    jobs = min(settings.jobs, max(len(pairs), 1))
    with contextlib.ExitStack() as stack:
        pool: WarmAgents | None = None
        if not settings.cold:
            stores = sorted({store for _, store in pairs})
            pool = agents
            if pool is None:
                pool = stack.enter_context(WarmAgents(jobs, stores=stores))

        def one(scenario: Scenario, store: str) -> ScenarioResult:
            result = _attempts(scenario, settings, store, pool, on_result)
            if not keep_outputs:
                result.logs, result.frames = [], []
            return result

        if jobs <= 1:
            return [one(s, p) for s, p in pairs]
        with ThreadPoolExecutor(max_workers=jobs) as pool_threads:
            futures = [pool_threads.submit(one, s, p) for s, p in pairs]
            return [f.result() for f in futures]


# --- what every front end says the same way ---------------------------------------------------


def record_key() -> str | None:
    """The live provider's key (its settings' ``api_key`` variable, see
    ``DSH_RECORD_PROVIDER``) after reading the keys of an untracked ``./.env`` (record mode is
    the only caller; ``_dotenv`` says what is ignored and why)."""
    from dsh_snapshot._dotenv import load_keys  # noqa: PLC0415 - .env is read in record mode only
    from dsh_snapshot._live import key_name, live_provider  # noqa: PLC0415 - ditto

    load_keys(Path.cwd())
    name = key_name(live_provider())
    key = os.environ.get(name, "").strip() if name is not None else "no key needed"
    return key or None


@dataclass(frozen=True, slots=True)
class RecordPreflight:
    """Whether a live ``record`` may start, decided once before its first scenario.

    Exactly one of ``api_key``, ``skipped`` and ``stopped`` is set.

    Attributes:
        api_key: the key to record with (see :meth:`settings`).
        skipped: why nothing is recorded, which is no failure (no key: a keyless checkout).
        stopped: why the run stops before any scenario, nothing written (the endpoint refused
            the key, has no balance, is unreachable or does not serve the model).
    """

    api_key: SecretStr | None = None
    skipped: str | None = None
    stopped: str | None = None

    def settings(self, settings: SnapshotSettings) -> SnapshotSettings:
        """``settings`` recording with this preflight's key."""
        return settings.model_copy(update={"api_key": self.api_key})


def record_preflight(tell: Callable[[str], None]) -> RecordPreflight:
    """The record policy of every front end: the live provider (``DSH_RECORD_PROVIDER``), its
    key from the environment or an untracked ``./.env``, then the provider's own check of its
    endpoint (one ``GET /models``), before any scenario runs.

    Args:
        tell: shows the user a line before the key is first sent (the host it goes to).

    Raises:
        dsh_core.plugins.PluginError: ``DSH_RECORD_PROVIDER`` names nothing usable.
    """
    # record mode only: none of this loads for a replay
    from dsh_snapshot._dotenv import key_destination  # noqa: PLC0415
    from dsh_snapshot._live import key_name, live_provider, preflight_problem  # noqa: PLC0415

    provider = live_provider()
    key = record_key()
    if key is None:
        return RecordPreflight(
            skipped=f"skipped: no {key_name(provider)} in the environment or ./.env"
        )
    host = key_destination(provider)
    if host is not None:
        tell(f"{key_name(provider)} is sent to {host} only")
    problem = preflight_problem(provider)
    if problem is not None:
        return RecordPreflight(stopped=f"stopped before any scenario, nothing written: {problem}")
    return RecordPreflight(api_key=SecretStr(key))


@dataclass(slots=True)
class Tally:
    """The counts behind the summary line of a batch.

    The CLI has every result at the end (:func:`summary_line`); the pytest plugin sees one
    report at a time, from every xdist worker, and adds each with :meth:`add`. Both print
    :meth:`line`.
    """

    scenarios: set[str] = field(default_factory=set[str])
    runs: int = 0
    sessions: int = 0
    calls: int = 0
    passed: int = 0
    failed: int = 0
    lacking: int = 0
    malformed: int = 0
    replaying: bool = True
    """Whether every run replayed a recording (else some were made)."""

    def add(
        self, scenario: str, verdict: Verdict, sessions: int, calls: int, replaying: bool
    ) -> None:
        """Count one run of ``scenario`` (any key naming its folder)."""
        self.scenarios.add(scenario)
        self.runs += 1
        self.sessions += sessions
        self.calls += calls
        self.passed += verdict == "pass"
        self.failed += verdict == "fail"
        self.lacking += verdict == "needs"
        self.replaying = self.replaying and replaying

    def line(self) -> str:
        """``9 scenarios (18 runs), 26 sessions, 60 model calls replayed: 18 passed, 0 failed``.

        A malformed scenario counts as a scenario and as one failed row that made no run."""
        verb = "replayed" if self.replaying else "made"
        line = (
            f"{len(self.scenarios) + self.malformed} scenarios ({self.runs} runs), "
            f"{self.sessions} sessions, {self.calls} model calls {verb}: {self.passed} passed, "
            f"{self.failed + self.malformed} failed"
        )
        line += f" ({self.malformed} malformed)" if self.malformed else ""
        return line + (f", {self.lacking} need what we lack" if self.lacking else "")


def summary_line(results: Iterable[ScenarioResult], broken: Sequence[BrokenScenario] = ()) -> str:
    """The summary line of a batch (see :meth:`Tally.line`)."""
    tally = Tally(malformed=len(broken))
    for r in results:
        tally.add(str(r.scenario.path), r.verdict, r.sessions, r.calls, r.settings.replaying)
    return tally.line()

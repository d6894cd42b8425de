"""Running many scenarios (in parallel), the proof, and the result table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import cast

from rich.console import Console
from rich.table import Table

from dsh_snapshot._runner import Composition, RunOptions, ScenarioResult, run_scenario
from dsh_snapshot._scenario import BrokenScenario, Scenario
from dsh_snapshot._warm import WarmAgents

__all__ = [
    "print_broken",
    "print_results",
    "run_many",
    "run_proof",
    "summary_line",
]


def run_many(
    scenarios: Sequence[Scenario],
    options: RunOptions,
    compositions: Sequence[Composition],
    jobs: int,
    *,
    keep_outputs: bool = True,
) -> list[ScenarioResult]:
    """Run every (scenario, composition) pair; results in input order.

    Threads suffice: each run's work happens in its own agent subprocess, forked from one warm
    agent per worker unless ``options.cold``.

    Args:
        keep_outputs: keep each run's normalised logs and frames on its result. A caller that
            only reports verdicts passes ``False``: over hundreds of runs those outputs are
            nearly all of the gate's memory (about 0.2 MiB a run), and nothing else grows.
    """
    pairs = [
        (s, replace(options, composition=cast(Composition, c)))
        for s in scenarios
        for c in s.compositions(compositions)
    ]
    jobs = min(jobs, max(len(pairs), 1))
    with WarmAgents(jobs) as warm:
        agents = None if options.cold else warm

        def run(scenario: Scenario, run_options: RunOptions) -> ScenarioResult:
            result = run_scenario(scenario, run_options, agents)
            if not keep_outputs:
                result.logs, result.frames = [], []
            return result

        if jobs <= 1:
            return [run(s, o) for s, o in pairs]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(run, [s for s, _ in pairs], [o for _, o in pairs]))


def summary_line(results: Iterable[ScenarioResult], broken: Sequence[BrokenScenario] = ()) -> str:
    """``9 scenarios (18 runs), 26 sessions, 60 model calls replayed: 18 passed, 0 failed``.

    A malformed scenario counts as a scenario and as one failed row that made no run."""
    items = list(results)
    names = {r.scenario.path for r in items}
    sessions = sum(r.sessions for r in items)
    calls = sum(r.calls for r in items)
    passed = sum(1 for r in items if r.ok)
    lacking = sum(1 for r in items if r.needs)
    verb = "replayed" if all(r.options.mode in ("replay", "refresh") for r in items) else "made"
    failed = len(items) - passed - lacking + len(broken)
    line = (
        f"{len(names) + len(broken)} scenarios ({len(items)} runs), {sessions} sessions, "
        f"{calls} model calls {verb}: {passed} passed, {failed} failed"
    )
    line += f" ({len(broken)} malformed)" if broken else ""
    return line + (f", {lacking} need what we lack" if lacking else "")


def _verdict(result: ScenarioResult) -> str:
    if result.ok:
        return "[green]pass[/green]"
    return "[yellow]NEEDS[/yellow]" if result.needs else "[red]FAIL[/red]"


def print_broken(console: Console, broken: Sequence[BrokenScenario]) -> None:
    """One line per malformed scenario, with its error in full."""
    for b in broken:
        console.print(f"[red]MALFORMED[/red] {b.name} ({b.path})", highlight=False)
        console.print(f"  - {b.error}", highlight=False, markup=False, soft_wrap=True)


def print_results(
    console: Console,
    results: Sequence[ScenarioResult],
    title: str,
    broken: Sequence[BrokenScenario] = (),
) -> None:
    """The result table (a malformed scenario is a failed row), then every failure in full,
    then the summary line."""
    table = Table(title=title)
    for column in (
        "scenario",
        "composition",
        "mode",
        "result",
        "sessions",
        "calls",
        "seconds",
        "detail",
    ):
        table.add_column(column, overflow="fold")
    for r in results:
        detail = ", ".join(r.written) if r.ok and r.written else ("" if r.ok else r.summary)
        table.add_row(
            r.scenario.name,
            r.options.composition,
            r.options.mode,
            _verdict(r),
            str(r.sessions),
            str(r.calls),
            f"{r.seconds:.2f}",
            detail[:120],
        )
    for b in broken:
        table.add_row(b.name, "", "", "[red]MALFORMED[/red]", "", "", "", "see below")
    console.print(table)
    print_broken(console, broken)
    for r in results:
        if not r.ok:
            console.print(
                f"{_verdict(r)} {r.scenario.name}[{r.options.composition}] ({r.scenario.path})",
                highlight=False,
            )
            for failure in r.failures:
                console.print(f"  - {failure}", highlight=False, markup=False)
    console.print(summary_line(results, broken), highlight=False)


def run_proof(
    console: Console, scenarios: Sequence[Scenario], options: RunOptions, jobs: int
) -> bool:
    """Red-to-green: every fork scenario must fail with the seedLength slice off and pass with
    it on. Prints which assertion went red for each. Returns True when the proof holds."""
    forks = [s for s in scenarios if s.fork_children]
    if not forks:
        console.print(
            "proof: no fork scenario (a child fixture with a non-zero seedLength) "
            "under the given paths",
            highlight=False,
        )
        return False
    off = run_many(forks, replace(options, seed_slice=False), ["jsonl"], jobs, keep_outputs=False)
    on = run_many(forks, replace(options, seed_slice=True), ["jsonl"], jobs, keep_outputs=False)
    held = True
    console.print(
        "proof, slice OFF (DSH_REPLAY_SEED_SLICE=false): every fork scenario must go red",
        highlight=False,
    )
    for r in off:
        if r.ok:
            held = False
            console.print(
                f"  [red]NOT RED[/red] {r.scenario.name}: passed without the slice", highlight=False
            )
        else:
            console.print(
                f"  [green]red as required[/green] {r.scenario.name}: {r.summary}", highlight=False
            )
            for failure in r.failures[1:]:
                console.print(f"      also: {failure}", highlight=False, markup=False)
    console.print("proof, slice ON: every fork scenario must be green", highlight=False)
    for r in on:
        if r.ok:
            console.print(f"  [green]green[/green] {r.scenario.name}", highlight=False)
        else:
            held = False
            console.print(f"  [red]RED[/red] {r.scenario.name}: {r.summary}", highlight=False)
    verdict = "holds: red without the slice, green with it" if held else "FAILED"
    console.print(f"proof {verdict} ({len(forks)} fork scenarios)", highlight=False)
    return held

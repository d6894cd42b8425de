"""The result table (with the engine's summary line), and the proof (two engine runs and their
verdict)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dsh_core.plugins import DEFAULT_STORE_BACKEND
from dsh_snapshot._discover import BrokenScenario
from dsh_snapshot._engine import run, summary_line
from dsh_snapshot._request_drift import header_summary
from dsh_snapshot._runner import ScenarioResult
from dsh_snapshot._scenario import Scenario
from dsh_snapshot._settings import SnapshotSettings

__all__ = ["print_broken", "print_results", "run_proof"]


def _verdict(result: ScenarioResult) -> str:
    return {"pass": "[green]pass[/green]", "needs": "[yellow]NEEDS[/yellow]"}.get(
        result.verdict, "[red]FAIL[/red]"
    )


def print_broken(console: Console, broken: Sequence[BrokenScenario]) -> None:
    """One line per malformed scenario, with its error in full."""
    for b in broken:
        console.print(f"[red]MALFORMED[/red] {escape(f'{b.name} ({b.path})')}", highlight=False)
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
        "store",
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
            escape(r.scenario.name),
            escape(r.store),
            r.mode,
            _verdict(r),
            str(r.sessions),
            str(r.calls),
            f"{r.seconds:.2f}",
            escape(detail[:120]),
        )
    for b in broken:
        table.add_row(escape(b.name), "", "", "[red]MALFORMED[/red]", "", "", "", "see below")
    console.print(table)
    print_broken(console, broken)
    for r in results:
        if not r.ok:
            where = f"{r.scenario.name}[{r.store}] ({r.scenario.path})"
            console.print(
                f"{_verdict(r)} {escape(where)}",
                highlight=False,
            )
            for failure in r.failures:
                console.print(f"  - {failure}", highlight=False, markup=False)
    notes = header_summary([(r.scenario.name, r.header_note) for r in results])
    if notes:
        console.print(notes, highlight=False, markup=False)
    console.print(summary_line(results, broken), highlight=False)


def run_proof(console: Console, scenarios: Sequence[Scenario], settings: SnapshotSettings) -> bool:
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
    one_backend = {"mode": "replay", "stores": (DEFAULT_STORE_BACKEND,)}
    off = run(
        settings.model_copy(update={**one_backend, "seed_slice": False}), forks, keep_outputs=False
    )
    on = run(
        settings.model_copy(update={**one_backend, "seed_slice": True}), forks, keep_outputs=False
    )
    held = True
    console.print(
        "proof, slice OFF (DSH_REPLAY_SEED_SLICE=false): every fork scenario must go red",
        highlight=False,
    )
    for r in off:
        if r.ok:
            held = False
            console.print(
                f"  [red]NOT RED[/red] {escape(r.scenario.name)}: passed without the slice",
                highlight=False,
            )
        else:
            console.print(
                f"  [green]red as required[/green] {escape(f'{r.scenario.name}: {r.summary}')}",
                highlight=False,
            )
            for failure in r.failures[1:]:
                console.print(f"      also: {failure}", highlight=False, markup=False)
    console.print("proof, slice ON: every fork scenario must be green", highlight=False)
    for r in on:
        if r.ok:
            console.print(f"  [green]green[/green] {escape(r.scenario.name)}", highlight=False)
        else:
            held = False
            console.print(
                f"  [red]RED[/red] {escape(f'{r.scenario.name}: {r.summary}')}", highlight=False
            )
    verdict = "holds: red without the slice, green with it" if held else "FAILED"
    console.print(f"proof {verdict} ({len(forks)} fork scenarios)", highlight=False)
    return held

"""``record``: the expectation retry loop, progress and the cost table.

A live record first passes the engine's preflight (:func:`dsh_snapshot._engine.record_preflight`,
shared with the pytest plugin): a rejected key, an empty balance, an unreachable endpoint or an
unserved model stop the run there, in one line, before any scenario has started or anything is
written. Each scenario is then recorded;
a live recording that misses its ``expect:`` is recorded again by the engine
(:func:`dsh_snapshot.run`), up to ``retries`` more times, and a scenario that still misses fails
with what was expected and what came, its committed fixtures untouched (the runner writes only
a recording that meets them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from dsh_snapshot._engine import run, summary_line, will_retry
from dsh_snapshot._keep_answers import kept_answers_note
from dsh_snapshot._provenance import Usage
from dsh_snapshot._runner import ScenarioResult
from dsh_snapshot._scenario import Scenario
from dsh_snapshot._settings import SnapshotSettings

__all__ = ["RecordRun", "RecordSettings", "print_record_summary", "record_all"]


class RecordSettings(BaseSettings):
    """Settings of a record run, from ``DSH_RECORD_*`` environment variables.

    Attributes:
        retries: how many more times a live recording that misses its expectations is made
            before the scenario fails (``DSH_RECORD_RETRIES``, default 2).
    """

    model_config = SettingsConfigDict(env_prefix="DSH_RECORD_", extra="ignore")

    retries: int = Field(default=2, ge=0)


@dataclass(slots=True)
class RecordRun:
    """One scenario's record: the last attempt's result and what every attempt cost."""

    result: ScenarioResult
    spent: Usage
    seconds: float

    @property
    def retries(self) -> int:
        """Attempts after the first."""
        return self.result.attempts - 1


def _stats(usage: Usage) -> str:
    return (
        f"calls {usage.calls} · tokens in {usage.input:,} out {usage.output:,} · "
        f"cache hits {usage.cache_read:,}"
    )


def record_all(
    console: Console, scenarios: Sequence[Scenario], settings: SnapshotSettings
) -> list[RecordRun]:
    """Record every scenario through the engine (``settings.jobs`` at a time, each live
    recording retried up to ``settings.retries`` times), showing progress; runs in input
    order."""
    total = Usage()
    done = 0
    spent: dict[Path, Usage] = {}
    seconds: dict[Path, float] = {}
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("recording", total=len(scenarios), stats=_stats(total))

        def on_attempt(result: ScenarioResult) -> None:
            nonlocal total, done
            # An authored override's throw or hang is a call without a finish chunk in the log.
            cost = replace(result.usage, calls=result.calls)
            path = result.scenario.path
            total = total + cost
            spent[path] = spent.get(path, Usage()) + cost
            seconds[path] = seconds.get(path, 0.0) + result.seconds
            verdict = "ok" if result.ok else ("missed" if result.missed else "FAIL")
            progress.console.print(
                f"[{done + 1}/{len(scenarios)}] {result.scenario.name}: {verdict} "
                f"(attempt {result.attempts}) {_stats(cost)}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            progress.update(task, stats=_stats(total))
            if not will_retry(settings, result):
                done += 1
                progress.advance(task)

        results = run(settings, scenarios, on_attempt)
        progress.update(task, description="recorded")
    return [RecordRun(r, spent[r.scenario.path], seconds[r.scenario.path]) for r in results]


def _recording(result: ScenarioResult) -> str:
    if result.scenario.authored:
        return "authored"
    if result.mode == "record-accept":
        return f"{result.scenario.meta.recording if result.scenario.meta else 'live'}, kept"
    return "scripted" if result.mode == "record-scripted" else "live"


def print_record_summary(console: Console, runs: Sequence[RecordRun]) -> None:
    """The cost table (every attempt counted), the failures in full, the summary line."""
    table = Table(title="dsh-snapshot record")
    for column in (
        "scenario",
        "recording",
        "result",
        "calls",
        "tokens in",
        "tokens out",
        "cache hits",
        "reasoning",
        "retries",
        "seconds",
        "detail",
    ):
        table.add_column(column, overflow="fold")
    total = Usage()
    for one in runs:
        r, spent = one.result, one.spent
        total = total + spent
        detail = ", ".join(r.written) if r.ok and r.written else ("" if r.ok else r.summary)
        table.add_row(
            escape(r.scenario.name),
            escape(_recording(r)),
            "[green]pass[/green]" if r.ok else "[red]FAIL[/red]",
            str(spent.calls),
            f"{spent.input:,}",
            f"{spent.output:,}",
            f"{spent.cache_read:,}",
            f"{spent.reasoning:,}",
            str(one.retries),
            f"{one.seconds:.2f}",
            escape(detail[:100]),
        )
    table.add_row(
        "total",
        "",
        "",
        str(total.calls),
        f"{total.input:,}",
        f"{total.output:,}",
        f"{total.cache_read:,}",
        f"{total.reasoning:,}",
        str(sum(one.retries for one in runs)),
        f"{sum(one.seconds for one in runs):.2f}",
        "",
        end_section=True,
    )
    console.print(table)
    for one in runs:
        r = one.result
        if not r.ok:
            console.print(
                f"[red]FAIL[/red] {escape(f'{r.scenario.name} ({r.scenario.path})')}",
                highlight=False,
            )
            for failure in r.failures:
                console.print(f"  - {failure}", highlight=False, markup=False)
        elif r.mode == "record-accept":
            # Plainly: the new requests are committed with answers nobody asked them.
            console.print(
                f"{r.scenario.name}: {kept_answers_note(r.accepted)}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    console.print(summary_line(one.result for one in runs), highlight=False)

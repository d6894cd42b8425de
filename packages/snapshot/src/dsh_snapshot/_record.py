"""``record``: preflight, the expectation retry loop, progress and the cost table.

A live record first asks the endpoint which models it serves (one ``GET /models``): a rejected
key, an empty balance, an unreachable endpoint or an unserved model stop the run there, in one
line, before any scenario has started or anything is written. Each scenario is then recorded;
a live recording that misses its ``expect:`` is recorded again, up to ``retries`` more times
(tenacity), and a scenario that still misses fails with what was expected and what came, its
committed fixtures untouched (the runner writes only a recording that meets them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_attempt, wait_none

from dsh_core.plugins import DEFAULT_STORE_BACKEND
from dsh_snapshot._batch import summary_line
from dsh_snapshot._live import live_provider
from dsh_snapshot._live import preflight_problem as provider_preflight
from dsh_snapshot._provenance import Usage
from dsh_snapshot._runner import RunOptions, ScenarioResult, run_scenario
from dsh_snapshot._scenario import Scenario

__all__ = ["RecordRun", "RecordSettings", "preflight_problem", "print_record_summary", "record_all"]


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


def preflight_problem() -> str | None:
    """Run the live provider's endpoint preflight (``DSH_RECORD_PROVIDER``, its own settings);
    the one-line reason to stop, or ``None`` when the endpoint serves the configured model."""
    return provider_preflight(live_provider())


def _record_one(
    scenario: Scenario,
    options: RunOptions,
    retries: int,
    on_attempt: Callable[[ScenarioResult], None],
) -> RecordRun:
    spent = Usage()
    attempts = 0
    seconds = 0.0

    def attempt() -> ScenarioResult:
        nonlocal spent, attempts, seconds
        attempts += 1
        result = run_scenario(scenario, options)
        result.attempts = attempts
        # An authored override's throw or hang is a call without a finish chunk in the log.
        spent = spent + replace(result.usage, calls=result.calls)
        seconds += result.seconds
        on_attempt(result)
        return result

    def last(state: RetryCallState) -> ScenarioResult:
        assert state.outcome is not None
        result: ScenarioResult = state.outcome.result()
        result.failures.append(
            f"still missing its expectations after {result.attempts} recordings; "
            f"the committed fixtures are untouched"
        )
        return result

    # Only a live model answers differently when asked again; a scripted one never would.
    live = options.mode == "record" and not scenario.authored
    retrying = Retrying(
        stop=stop_after_attempt(retries + 1 if live else 1),
        retry=retry_if_result(lambda r: bool(r.missed)),
        wait=wait_none(),
        retry_error_callback=last,
    )
    result = retrying(attempt)
    return RecordRun(result, spent, seconds)


def _stats(usage: Usage) -> str:
    return (
        f"calls {usage.calls} · tokens in {usage.input:,} out {usage.output:,} · "
        f"cache hits {usage.cache_read:,}"
    )


def record_all(
    console: Console,
    scenarios: Sequence[Scenario],
    options: RunOptions,
    retries: int,
    jobs: int = 1,
) -> list[RecordRun]:
    """Record every scenario (``jobs`` at a time), showing progress; runs in input order."""
    total = Usage()
    done = 0
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
            nonlocal total
            total = total + replace(result.usage, calls=result.calls)
            verdict = "ok" if result.ok else ("missed" if result.missed else "FAIL")
            progress.console.print(
                f"[{done + 1}/{len(scenarios)}] {result.scenario.name}: {verdict} "
                f"(attempt {result.attempts}) {_stats(replace(result.usage, calls=result.calls))}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            progress.update(task, stats=_stats(total))

        def one(scenario: Scenario) -> RecordRun:
            progress.update(task, description=f"recording {scenario.name}")
            opts = replace(options, persistence=DEFAULT_STORE_BACKEND)
            return _record_one(scenario, opts, retries, on_attempt)

        runs: dict[int, RecordRun] = {}
        if jobs <= 1:
            for index, scenario in enumerate(scenarios):
                runs[index] = one(scenario)
                done += 1
                progress.advance(task)
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                futures = {pool.submit(one, s): i for i, s in enumerate(scenarios)}
                for future in as_completed(futures):
                    runs[futures[future]] = future.result()
                    done += 1
                    progress.advance(task)
        progress.update(task, description="recorded")
    return [runs[i] for i in range(len(scenarios))]


def _recording(result: ScenarioResult) -> str:
    if result.scenario.authored:
        return "authored"
    return "scripted" if result.options.mode == "record-scripted" else "live"


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
    for run in runs:
        r, spent = run.result, run.spent
        total = total + spent
        detail = ", ".join(r.written) if r.ok and r.written else ("" if r.ok else r.summary)
        table.add_row(
            r.scenario.name,
            _recording(r),
            "[green]pass[/green]" if r.ok else "[red]FAIL[/red]",
            str(spent.calls),
            f"{spent.input:,}",
            f"{spent.output:,}",
            f"{spent.cache_read:,}",
            f"{spent.reasoning:,}",
            str(run.retries),
            f"{run.seconds:.2f}",
            detail[:100],
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
        str(sum(run.retries for run in runs)),
        f"{sum(run.seconds for run in runs):.2f}",
        "",
        end_section=True,
    )
    console.print(table)
    for run in runs:
        r = run.result
        if not r.ok:
            console.print(f"[red]FAIL[/red] {r.scenario.name} ({r.scenario.path})", highlight=False)
            for failure in r.failures:
                console.print(f"  - {failure}", highlight=False, markup=False)
    console.print(summary_line(run.result for run in runs), highlight=False)

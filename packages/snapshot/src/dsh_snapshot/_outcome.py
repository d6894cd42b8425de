"""The outcome step of a scenario run: normalise what the run produced, then judge it.

Whichever model side made the run (:mod:`dsh_snapshot._model_side`), its outcome is decided here
and only by the mode: ``replay`` compares with the committed fixtures (and keeps the outputs of
a failing one for review, :mod:`dsh_snapshot._pending`); ``refresh`` and the record modes check
``expect:`` and write the outputs back (:func:`write_fixtures`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_acp_agent import EXIT_OK, EXIT_REPLAY_NOT_CONSUMED
from dsh_core import ScenarioFiles
from dsh_llm_replay import NotConsumedError, ReplayError, ReplayReport
from dsh_snapshot._compat import UPSTREAM_ALLOWANCES, Allowances, apply_allowances, turn_messages
from dsh_snapshot._diff import first_difference
from dsh_snapshot._expect import check_expectations
from dsh_snapshot._fsafe import read_file_text
from dsh_snapshot._harvest import expected_fixtures as _expected
from dsh_snapshot._harvest import normalized_outputs
from dsh_snapshot._live import live_provider
from dsh_snapshot._model_side import Harvest, RunPlace
from dsh_snapshot._pending import fixture_files, keep_pending
from dsh_snapshot._provenance import Provenance, live_provenance, recording_usage, with_provenance
from dsh_snapshot._publish import publish_fixtures
from dsh_snapshot._request_drift import drift_failures, header_note, only_drift
from dsh_snapshot._result import ScenarioResult
from dsh_snapshot._scenario import AllowEntry, Scenario

__all__ = ["Ending", "judge", "write_fixtures"]


@dataclass(frozen=True, slots=True)
class Ending:
    """How the agent ended, whichever side ran it."""

    code: int
    stderr: str
    """The tail of the agent's stderr, quoted when it exited with a failure."""
    report: Path | None
    """The replay report the run left, when its model was a recording."""
    foreign_command: Sequence[str] | None
    """A foreign agent's command (a kept review names it), or None for ours."""


def judge(
    run: RunPlace, harvest: Harvest, frames: list[Any], ending: Ending, result: ScenarioResult
) -> None:
    """Fold one finished run into ``result``: its normalised outputs, the replay report, the
    exit code, then the mode's outcome (compare, or check and write)."""
    scenario, settings = run.scenario, run.settings
    result.accepted = harvest.accepted
    result.drift = list(harvest.drift)
    result.sessions = len(harvest.logs)
    logs, frames = normalized_outputs(
        scenario,
        harvest.logs,
        frames,
        cwds=[str(run.cwd)],
        session_ids=harvest.session_ids,
        literals=harvest.literals,
    )
    result.logs, result.frames = logs, frames
    result.usage = recording_usage(logs)
    consumed = _check_report(ending.report, result) if ending.report else True
    # "Replay not consumed" is an exit code the report check has just said better.
    if ending.code != EXIT_OK and not (ending.code == EXIT_REPLAY_NOT_CONSUMED and not consumed):
        result.failures.append(f"the agent exited with code {ending.code}; stderr: {ending.stderr}")
    if settings.mode == "replay":
        _replayed(run, logs, frames, ending, result)
    elif not result.failures and _meets_expectations(scenario, result):
        _publish(run, logs, frames, result)


def _check_report(path: Path, result: ScenarioResult) -> bool:
    """Fold the agent's replay report into the result; True when the recording was consumed.

    A request drift leaves the recording unconsumed, but when it is the only problem every
    recorded answer was used, in order: the drift is the whole failure (and accepting the run
    keeps the recorded answers), so no ``assert_consumed`` repeats it."""
    try:
        report = ReplayReport.read(path)
    except ReplayError as exc:
        result.failures.append(f"replay report: {exc}")
        return False
    drift = drift_failures(report)
    result.drift += drift
    result.failures.extend(drift)
    result.calls_replayed = report.replayed_calls
    try:
        report.assert_consumed()
    except NotConsumedError as exc:
        if not only_drift(report):
            result.failures.append(f"assert_consumed: {exc}")
        return False
    return True


# --- replay: compare ----------------------------------------------------------------------------


def _replayed(
    run: RunPlace,
    logs: list[list[Any]],
    frames: list[Any],
    ending: Ending,
    result: ScenarioResult,
) -> None:
    scenario, settings = run.scenario, run.settings
    result.header_note = header_note(scenario.session_files)
    if settings.check == "messages":
        _compare_messages(scenario, frames, result)
        return
    allowances = settings.allowances
    if allowances is None:
        allowances = UPSTREAM_ALLOWANCES if scenario.meta is None else Allowances()
    # Only a drift went wrong: every recorded answer was used, so accepting the outputs takes
    # the new requests with those answers.
    ran_clean = all(f in result.drift for f in result.failures)
    _compare(scenario, logs, frames, result, allowances)
    if settings.seed_slice:  # the proof's deliberate red is nothing to review
        note = keep_pending(
            scenario, run.store, logs, frames, result.failures, ran_clean,
            ending.foreign_command, result.drift,
        )  # fmt: skip
        result.failures.extend([note] if note else [])


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


# --- refresh and record: check, then write ------------------------------------------------------


def _meets_expectations(scenario: Scenario, result: ScenarioResult) -> bool:
    """Record modes: check ``expect:`` of ``snapshot.yml``; a miss writes nothing."""
    if scenario.meta is None or not scenario.meta.expect:
        return True
    result.missed = check_expectations(scenario.meta.expect, result.logs)
    result.failures.extend(f"expectation missed: {m}" for m in result.missed)
    return not result.missed


def _publish(
    run: RunPlace, logs: list[list[Any]], frames: list[Any], result: ScenarioResult
) -> None:
    scenario, settings = run.scenario, run.settings
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
        # A refresh replays the live recording: it is still the one made then, with that
        # model on that day, whatever the local provider settings or date say.
        provenance = scenario.meta.provenance
    literals = [settings.key] if settings.key else []
    result.written = write_fixtures(scenario, logs, frames, recording, literals, provenance)


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
            meta_text = read_file_text(scenario.files.meta)
            files[ScenarioFiles.META] = with_provenance(
                meta_text, recording, provenance, scenario.meta.loop
            )
    return publish_fixtures(scenario.path, files, allowlist=allowlist, literals=literals)

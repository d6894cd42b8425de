"""``dsh-snapshot review`` and ``accept``: look at what a failing replay produced, keep it or not.

``review`` shows, per scenario with pending outputs (:mod:`dsh_snapshot._pending`), why its
replay failed and a unified diff of every fixture that changed (side by side when the terminal
is wide enough), then asks *accept*, *reject* or *skip*, as ``cargo insta review`` does.
``accept`` accepts without asking. Accepting is ``refresh`` for just that scenario: the same
files, through the same staged key scan and atomic publish (:func:`write_fixtures`); rejecting
drops the pending outputs. Pending outputs whose inputs changed since the failing run, or whose
run itself went wrong (the agent crashed, the replay was not consumed), are refused.

A replay that failed on request drift (the prompt, the system prompt, tools or model settings
changed on the agent's side) is accepted keylessly: the new requests are written with the
recorded answers, the model is not asked again, and accept says so. For our agent the pending
outputs are that already (the replay answered every drifted call from the recording); answers
that no longer fit (more, fewer or other calls, a tool the new request does not offer) are
refused naming the call. A scenario with ``agent:`` (another ACP agent, its model calls through
``dsh-llm-proxy``) stops at the refused request, so accept runs it again as ``record
--keep-answers`` does, and writes only a complete, clean run. What the model answers changes
only by recording again. Pending outputs of a run with another agent than the scenario's own
(``--agent``) are refused.
A ``dsh-llm-proxy`` recording root (the ``llm_proxy`` pytest fixture's folder for one test) is
not a scenario: there is nothing to review in it, and :func:`no_scenarios_message` says so.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.prompt import Prompt
from rich.table import Table
from rich.text import Text

from dsh_core import ScenarioFiles, parse_jsonl
from dsh_snapshot import _fsafe as fsafe
from dsh_snapshot._foreign import foreign_agent
from dsh_snapshot._fsafe import ConfinedPathError
from dsh_snapshot._keep_answers import NO_FIT, kept_answers_note, unfit_answer
from dsh_snapshot._pending import (
    Pending,
    PendingError,
    clear_pending,
    load_pending,
    stale_inputs,
)
from dsh_snapshot._publish import DirtyRecordingError
from dsh_snapshot._runner import run_scenario, write_fixtures
from dsh_snapshot._safeout import safe_console
from dsh_snapshot._scenario import Scenario
from dsh_snapshot._settings import SnapshotSettings
from dsh_snapshot._tree import TreeError
from dsh_snapshot._treeload import find_recordings

__all__ = [
    "REVIEW_COMMANDS",
    "Accepted",
    "FileDiff",
    "accept_pending",
    "file_diffs",
    "no_scenarios_message",
    "review_command",
]

REVIEW_COMMANDS = {
    "review": "show each scenario's pending outputs (what its failing replay produced) as a "
    "diff against the expected ones and accept, reject or skip them",
    "accept": "accept the pending outputs of failed replays without asking (refresh for just "
    "those scenarios, with the same key scan; after request drift, the new requests with the "
    "recorded answers, keylessly)",
}
_SIDE_BY_SIDE_WIDTH = 160
_MAX_DIFF_LINES = 400
_EXIT_FAILED = 1


@dataclass(frozen=True, slots=True)
class FileDiff:
    """One fixture's expected text against the pending actual one."""

    name: str
    expected: list[str]
    actual: list[str]


def _foreign_command(scenario: Scenario) -> tuple[str, ...] | None:
    agent = foreign_agent(scenario)
    return None if agent is None else agent.command


def _who(command: tuple[str, ...] | None) -> str:
    return "our agent" if command is None else f"the agent {' '.join(command)!r}"


@dataclass(frozen=True, slots=True)
class Accepted:
    """What accepting a scenario wrote.

    Attributes:
        written: the fixture names whose bytes changed (``-name`` for a removed child).
        kept_answers: the request changes taken with the recorded answers (the model was not
            asked again); empty when only outputs changed.
    """

    written: list[str]
    kept_answers: list[str]


def _record_again(scenario: Scenario) -> str:
    return (
        f"record it again: dsh-snapshot record --scripted {scenario.path} (answers from "
        f"{ScenarioFiles.SCRIPT}) or dsh-snapshot record {scenario.path} (live)"
    )


def _rerecord(scenario: Scenario) -> str:
    """What accept can change of a foreign agent's model calls, and what takes recording."""
    return (
        "a scenario with agent: replays the model calls dsh-llm-proxy recorded "
        "(session*.jsonl) as committed; after a replay that failed on a changed request (its "
        "prompt, system prompt, tools), accept takes the new requests with the recorded "
        "answers without asking the model (as dsh-snapshot record --keep-answers "
        f"{scenario.path} does); to change what the model answers, {_record_again(scenario)}"
    )


def _unfit(scenario: Scenario, why: str) -> PendingError:
    return PendingError(f"{NO_FIT}: {why}; they need the model: {_record_again(scenario)}")


def file_diffs(pending: Pending) -> list[FileDiff]:
    """Every fixture whose pending text differs from the committed one, plus committed
    children the run no longer produced (their actual side is empty)."""
    folder = pending.scenario.path
    names = set(pending.files) | {p.name for p in folder.glob(ScenarioFiles.CHILD_GLOB)}
    out: list[FileDiff] = []
    for name in sorted(names, key=lambda n: (n.startswith("stdout"), len(n), n)):
        # Through the one confined open: a committed fixture that is a link is an error
        # naming it (ConfinedPathError), never the outside file it points to.
        try:
            expected = fsafe.read_text(folder, name)
        except FileNotFoundError:
            expected = ""
        actual = pending.files.get(name, "")
        if expected != actual:
            out.append(FileDiff(name, expected.splitlines(), actual.splitlines()))
    return out


def _unified(diff: FileDiff) -> Text:
    text = Text()
    lines = list(
        difflib.unified_diff(
            diff.expected,
            diff.actual,
            f"{diff.name} (expected)",
            f"{diff.name} (actual)",
            lineterm="",
        )
    )
    for line in lines[:_MAX_DIFF_LINES]:
        style = "bold" if line.startswith(("---", "+++")) else ""
        if not style:
            style = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
        text.append(line + "\n", style=style)
    if len(lines) > _MAX_DIFF_LINES:
        text.append(f"… {len(lines) - _MAX_DIFF_LINES} more diff lines\n", style="dim")
    return text


def _side_by_side(diff: FileDiff) -> Table:
    table = Table(title=diff.name, expand=True, show_lines=False)
    table.add_column("line", justify="right", style="dim", no_wrap=True)
    table.add_column("expected", overflow="fold", ratio=1)
    table.add_column("actual", overflow="fold", ratio=1)
    matcher = difflib.SequenceMatcher(None, diff.expected, diff.actual, autojunk=False)
    rows = 0
    for group in matcher.get_grouped_opcodes(2):
        table.add_row("…", "", "", style="cyan")
        for tag, i1, i2, j1, j2 in group:
            for k in range(max(i2 - i1, j2 - j1)):
                left = diff.expected[i1 + k] if i1 + k < i2 else ""
                right = diff.actual[j1 + k] if j1 + k < j2 else ""
                changed = tag != "equal"
                table.add_row(
                    str(i1 + k + 1 if i1 + k < i2 else j1 + k + 1),
                    Text(left, style="red" if changed and left else ""),
                    Text(right, style="green" if changed and right else ""),
                )
                rows += 1
        if rows > _MAX_DIFF_LINES:
            table.add_row("…", "more differences not shown", "", style="dim")
            break
    return table


def _render(pending: Sequence[Pending], width: int) -> RenderableType:
    first = pending[0]
    head = Text()
    head.append(f"{first.scenario.name}", style="bold")
    head.append(f"  ({first.scenario.path})\n", style="dim")
    head.append(f"failed replay ({', '.join(p.store for p in pending)}):\n")
    for failure in first.failures[:5]:
        head.append(f"  {failure}\n", style="yellow")
    if first.drift:
        head.append(
            "accepting takes the new requests with the recorded answers: the model is NOT "
            "asked again\n",
            style="bold",
        )
    if _foreign_command(first.scenario) is not None:
        head.append(f"note: {_rerecord(first.scenario)}\n", style="dim")
    parts: list[RenderableType] = [head]
    for diff in file_diffs(first):
        parts.append(_side_by_side(diff) if width >= _SIDE_BY_SIDE_WIDTH else _unified(diff))
    return Panel(Group(*parts), title="dsh-snapshot review", title_align="left")


def _same_run(pending: Sequence[Pending]) -> Pending:
    """The first pending run, once every one is current and ran the scenario's own agent."""
    if not pending:
        raise PendingError("nothing pending: its last replay passed, or it has not been replayed")
    first = pending[0]
    scenario = first.scenario
    own = _foreign_command(scenario)
    for one in pending:
        changed = stale_inputs(one)
        if changed:
            raise PendingError(
                f"{', '.join(changed)} changed since the failing replay ({one.store}) "
                f"kept its outputs; replay again (dsh-snapshot replay {scenario.path}) and "
                "review the new ones"
            )
        if one.agent != own:
            raise PendingError(
                f"the failing replay ({one.store}) ran {_who(one.agent)}, but the "
                f"scenario runs {_who(own)} (was --agent given?); accepting would commit "
                "another agent's outputs as its own: replay it without --agent and review"
            )
    return first


def _foreign_drift(pending: Sequence[Pending]) -> bool:
    """A foreign agent's replay stopped at a changed request: accept records it again keeping
    the recorded answers (there are no pending outputs to write)."""
    return (
        bool(pending)
        and bool(pending[0].drift)
        and _foreign_command(pending[0].scenario) is not None
    )


def _acceptable(pending: Sequence[Pending]) -> Pending:
    """The one set of outputs accepting would write, or why there is none."""
    first = _same_run(pending)
    scenario = first.scenario
    own = _foreign_command(scenario)
    for one in pending:
        if not one.acceptable and one.drift and own is None:
            # Drifted, and something else went wrong: more, fewer or other calls.
            other = [f for f in one.failures if f not in one.drift]
            raise _unfit(scenario, f"{other[0] if other else 'no reason kept'} ({one.store})")
        if not one.acceptable:
            remedy = _rerecord(scenario) if own else "fix it and replay again"
            raise PendingError(
                f"the failing replay ({one.store}) went wrong beyond its outputs "
                f"({one.failures[0] if one.failures else 'no reason kept'}); accepting would "
                f"hide that: {remedy}"
            )
        if one.files != first.files:
            raise PendingError(
                f"the {first.store} and {one.store} runs produced different "
                "outputs; replay again and review"
            )
    return first


def _keep_answers(scenario: Scenario, pending: Sequence[Pending]) -> Accepted:
    """A foreign agent's drifted requests, recorded keylessly with the recorded answers (as
    ``record --keep-answers``): the fixtures change only when that run is complete and clean."""
    first = _same_run(pending)
    settings = SnapshotSettings(mode="record-accept", stores=(first.store,))
    result = run_scenario(scenario, settings, first.store)
    if not result.ok:
        why = result.failures[0].removeprefix("AgentError: ") if result.failures else "no reason"
        remedy = "" if "dsh-snapshot record" in why else f"; {_record_again(scenario)}"
        raise PendingError(f"{why}; nothing was written{remedy}")
    clear_pending(scenario)
    return Accepted(result.written, result.accepted)


def accept_pending(scenario: Scenario) -> Accepted:
    """Accept a scenario's pending outputs: write them as ``refresh`` would, then drop them.
    After request drift, the new requests keep the recorded answers (no model is asked): our
    agent's pending outputs already hold them; a foreign agent is run again through a proxy
    answering from its recording (see :func:`_keep_answers`).

    Raises:
        PendingError: nothing is pending, or it cannot be accepted (stale, a broken run,
            stores that disagree, recorded answers that do not fit the new requests).
        DirtyRecordingError: the key scan flagged the outputs; nothing was written.
    """
    pending = load_pending(scenario)
    if _foreign_drift(pending):
        return _keep_answers(scenario, pending)
    chosen = _acceptable(pending)
    if chosen.drift and (unfit := unfit_answer(chosen.files)) is not None:
        raise _unfit(scenario, unfit)
    stdout_name = scenario.stdout_file.name
    logs = [
        parse_jsonl(chosen.files[name], str(chosen.folder / name))
        for name in sorted((n for n in chosen.files if n != stdout_name), key=lambda n: (len(n), n))
    ]
    frames = parse_jsonl(chosen.files[stdout_name], str(chosen.folder / stdout_name))
    recording = None
    if scenario.meta is not None:
        recording = "authored" if scenario.authored else scenario.meta.recording
    written = write_fixtures(scenario, logs, frames, recording)
    clear_pending(scenario)
    return Accepted(written, list(chosen.drift))


def _accept_one(console: Console, scenario: Scenario) -> bool:
    try:
        accepted = accept_pending(scenario)
    except (PendingError, DirtyRecordingError, ValueError, OSError) as exc:
        console.print(
            f"{scenario.name}: not accepted: {exc}", highlight=False, markup=False, soft_wrap=True
        )
        return False
    shown = ", ".join(accepted.written) or "no fixture changed"
    kept = f": {kept_answers_note(accepted.kept_answers)}" if accepted.kept_answers else ""
    console.print(
        f"{scenario.name}: accepted ({shown}){kept}", highlight=False, markup=False, soft_wrap=True
    )
    return True


def review_command(
    command: str, scenarios: Sequence[Scenario], console: Console | None = None
) -> int:
    """Run ``review`` or ``accept`` over the scenarios; returns the exit status.

    The console defaults to the terminal's own width, which decides side by side or unified.
    """
    console = console or safe_console()
    found: list[tuple[Scenario, list[Pending]]] = []
    ok = True
    for scenario in scenarios:
        try:
            pending = load_pending(scenario)
        except PendingError as exc:
            console.print(f"{scenario.name}: {exc}", highlight=False, markup=False, soft_wrap=True)
            ok = False
            continue
        if pending:
            found.append((scenario, pending))
        elif command == "accept":
            why = "its last replay passed, or it has not been replayed"
            if _foreign_command(scenario) is not None:
                why = (
                    "its last replay passed, stopped before the agent finished, or it has not "
                    f"been replayed; {_rerecord(scenario)}"
                )
            console.print(
                f"{scenario.name}: nothing pending to accept ({why})",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            ok = False
    if not found:
        if command == "review" and ok:
            console.print(
                "dsh-snapshot review: nothing pending: every replay passed", highlight=False
            )
        return 0 if ok and command == "review" else _EXIT_FAILED
    if command == "accept":
        results = [_accept_one(console, scenario) for scenario, _ in found]
        return 0 if ok and all(results) else _EXIT_FAILED
    return _review(console, found, ok)


def no_scenarios_message(command: str, paths: Sequence[Path]) -> str | None:
    """What ``review`` / ``accept`` say for paths that hold ``dsh-llm-proxy`` recording roots
    but no scenario; ``None`` when they hold neither (the plain "no scenarios" applies)."""
    roots: list[Path] = []
    for path in paths:
        with contextlib.suppress(TreeError):
            roots += [p for p, kind in find_recordings(path) if kind == "proxy"]
    if not roots:
        return None
    named = str(roots[0]) if len(roots) == 1 else f"{len(roots)} folders (first {roots[0]})"
    return (
        f"dsh-snapshot {command}: {named}: a dsh-llm-proxy recording (as the llm_proxy pytest "
        "fixture keeps one per test), not a scenario: no input.json, no expected stdout, "
        "nothing pending to review or accept. Its test is its gate: the fixture replays it "
        "and fails the test unless it is consumed exactly. To change it, record the test "
        "again (pytest --llm-proxy-mode=record, the upstream key set); to look at it, "
        f"dsh-snapshot show {roots[0]}"
    )


def _why_not_acceptable(pending: list[Pending]) -> str:
    """``nothing to accept: …`` when the manifest says why, else empty."""
    try:
        _acceptable(pending)
    except PendingError as exc:
        return f"nothing to accept: {exc}"
    return ""


def _review(console: Console, found: list[tuple[Scenario, list[Pending]]], ok: bool) -> int:
    counts = {"accepted": 0, "rejected": 0, "skipped": 0}
    for index, (scenario, pending) in enumerate(found, 1):
        why: str | None = None
        try:
            console.print(_render(pending, console.width))
        except ConfinedPathError as exc:
            # A committed fixture is a link: nothing of it is shown, nothing can be accepted.
            why = f"not reviewable: {exc}"
        else:
            if not any(p.acceptable for p in pending) and not _foreign_drift(pending):
                # A replay that went wrong beyond its outputs: there is nothing to accept, so
                # no question; it stays failed until the scenario is fixed (or re-recorded).
                why = _why_not_acceptable(pending)
        if why is not None:
            if why:
                console.print(
                    f"{scenario.name}: {why}", highlight=False, markup=False, soft_wrap=True
                )
            counts["skipped"] += 1
            ok = False
            continue
        try:
            answer = Prompt.ask(
                f"[{index}/{len(found)}] {escape(scenario.name)}: [bold]a[/]ccept, "
                "[bold]r[/]eject, [bold]s[/]kip, [bold]q[/]uit",
                choices=["a", "r", "s", "q"],
                default="s",
                console=console,
            )
        except EOFError:
            answer = "q"
        if answer == "q":
            counts["skipped"] += len(found) - index + 1
            break
        if answer == "a":
            accepted = _accept_one(console, scenario)
            ok = ok and accepted
            counts["accepted" if accepted else "skipped"] += 1
        elif answer == "r":
            clear_pending(scenario)
            console.print(
                f"{scenario.name}: rejected (pending outputs dropped)",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            counts["rejected"] += 1
        else:
            counts["skipped"] += 1
    console.print(
        "dsh-snapshot review: " + ", ".join(f"{n} {what}" for what, n in counts.items()),
        highlight=False,
    )
    return 0 if ok else _EXIT_FAILED

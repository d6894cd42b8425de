"""Pending outputs: what a failing replay actually produced, kept beside the expected files.

A replay of one of our scenarios (``snapshot.yml``) that fails keeps its normalised outputs
in ``<scenario>/.pending/<store>/`` (git ignores ``.pending/``): the files exactly as
``refresh`` would write them, plus ``pending.json`` saying why the run failed and the digest
of every file the outputs were compared with or derived from. A replay that passes removes
them. ``dsh-snapshot review`` / ``accept`` read them (:mod:`dsh_snapshot._review`).

Upstream folders keep nothing: they are reference data this tool only reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_core import DshError, ScenarioFiles, dumps_line, loads_bounded
from dsh_snapshot import _fsafe as fsafe
from dsh_snapshot._dotenv import run_git
from dsh_snapshot._keyscan import scan_text
from dsh_snapshot._scenario import Scenario

__all__ = [
    "MANIFEST",
    "Pending",
    "PendingError",
    "clear_pending",
    "fixture_files",
    "keep_failure",
    "keep_pending",
    "load_pending",
    "pending_tracked",
    "stale_inputs",
]

MANIFEST = "pending.json"
_FORMAT = 1
_MAX_MANIFEST = 1024 * 1024
_FIXTURE_NAME = re.compile(r"(?:session(?:\.\d+)?|stdout[a-z.]*)\.jsonl")
_IN_SCENARIO = "{scenario}/"


class PendingError(DshError):
    """Pending outputs are missing, unreadable or cannot be accepted; the message says why."""


@dataclass(frozen=True, slots=True)
class Pending:
    """One store backend's pending outputs of one scenario.

    Attributes:
        scenario: the scenario.
        store: the store backend of the failing run (``jsonl``, ``sqlite``).
        folder: ``<scenario>/.pending/<store>``.
        files: fixture name → the actual text the run produced.
        failures: why the run failed, as the gate reported it.
        acceptable: the run itself went through (only its outputs differ), so accepting it
            is what ``refresh`` would write; ``False`` when the agent crashed or the replay
            was not consumed.
        inputs: file name → ``sha256:…`` of each input when the run happened (``""``: absent).
        agent: the foreign agent's command the run used (``snapshot.yml``'s ``agent:`` or
            ``--agent``), ``None`` for ours.
        drift: the requests that differed from the recorded ones (request drift, other new
            messages): accepting takes them with the recorded answers, keylessly.
    """

    scenario: Scenario
    store: str
    folder: Path
    files: dict[str, str]
    failures: tuple[str, ...]
    acceptable: bool
    inputs: dict[str, str]
    agent: tuple[str, ...] | None = None
    drift: tuple[str, ...] = ()


def _render(rows: Sequence[Any]) -> str:
    return "".join(dumps_line(r) + "\n" for r in rows)


def fixture_files(
    scenario: Scenario, logs: Sequence[Sequence[Any]], frames: Sequence[Any]
) -> dict[str, str]:
    """The fixture files of normalised outputs, by name, as ``refresh`` writes them."""
    files = {scenario.stdout_file.name: _render(frames)}
    for index, rows in enumerate(logs):
        files[ScenarioFiles.session_name(index)] = _render(rows)
    return files


def _digest(path: Path) -> str:
    try:
        return "sha256:" + hashlib.sha256(fsafe.read_file(path)).hexdigest()
    except FileNotFoundError:
        return ""


def _agent_files(scenario: Scenario) -> set[str]:
    """The files inside the scenario folder its ``agent:`` command names; never one outside
    it (the command is untrusted: ``{scenario}/../x`` is not read)."""
    agent = scenario.meta.agent if scenario.meta is not None else None
    folder = scenario.path.resolve()
    names: set[str] = set()
    for arg in agent or ():
        path = (folder / arg.removeprefix(_IN_SCENARIO)).resolve()
        if arg.startswith(_IN_SCENARIO) and path.is_file() and path.is_relative_to(folder):
            names.add(path.relative_to(folder).as_posix())
    return names


def _inputs(scenario: Scenario) -> dict[str, str]:
    """Digests of what the run compared with (fixtures) or derived from (steps, override,
    meta, the scenario's own files its ``agent:`` command names, e.g. ``{scenario}/agent.py``):
    a pending run is stale as soon as one of them changes."""
    names = {p.name for p in scenario.path.glob(ScenarioFiles.SESSION_GLOB)}
    names |= {
        scenario.stdout_file.name,
        ScenarioFiles.INPUT,
        ScenarioFiles.META,
        ScenarioFiles.OVERRIDE,
    }
    names |= _agent_files(scenario)
    return {name: _digest(scenario.path / name) for name in sorted(names)}


def stale_inputs(pending: Pending) -> list[str]:
    """The inputs that changed since ``pending`` was written (added, removed or edited)."""
    now = _inputs(pending.scenario)
    names = sorted(set(now) | set(pending.inputs))
    return [n for n in names if now.get(n, "") != pending.inputs.get(n, "")]


def _root(scenario: Scenario) -> Path:
    return scenario.files.pending


def clear_pending(scenario: Scenario, store: str | None = None) -> None:
    """Remove a scenario's pending outputs (one backend's, or all of them).

    Removal works on directory descriptors reached without following links: a ``.pending``
    that is a link to elsewhere is unlinked itself, never emptied.
    """
    with contextlib.suppress(OSError, fsafe.ConfinedPathError):
        if store is None:
            with fsafe.confined_dir(scenario.path) as fd:
                if stat.S_ISLNK(os.lstat(ScenarioFiles.PENDING, dir_fd=fd).st_mode):
                    os.unlink(ScenarioFiles.PENDING, dir_fd=fd)
                else:
                    shutil.rmtree(ScenarioFiles.PENDING, dir_fd=fd)
            return
        # One plain name below .pending/, never a path: a store name that came from
        # snapshot.yml must not walk out (``../../victim``) of the descriptor it is removed at.
        if "/" in store or "\0" in store or store in ("", ".", ".."):
            raise fsafe.ConfinedPathError(f"{store!r}: not a store name")
        with fsafe.confined_dir(scenario.path, ScenarioFiles.PENDING) as fd:
            shutil.rmtree(store, dir_fd=fd)
        with fsafe.confined_dir(scenario.path) as fd:
            os.rmdir(ScenarioFiles.PENDING, dir_fd=fd)  # not empty: another store's are pending


def keep_pending(
    scenario: Scenario,
    store: str,
    logs: Sequence[Sequence[Any]],
    frames: Sequence[Any],
    failures: Sequence[str],
    acceptable: bool,
    agent: Sequence[str] | None = None,
    drift: Sequence[str] = (),
) -> str | None:
    """After a replay: keep the outputs of a failed run of one of our scenarios, or clear
    them when it passed. Called by the runner; never raises for a scenario problem.

    ``acceptable``: the run itself went through before its outputs were compared (the agent
    exited cleanly, the replay was consumed), so accepting its outputs is what ``refresh``
    would write. ``agent``: the foreign agent's command the run used, if any (accepting the
    outputs of another agent than the scenario's own is refused). ``drift``: the requests
    that differed from the recorded ones.

    Returns:
        for a failed run, a note for its failures: where the outputs were kept, or why they
        could not be; ``None`` when the run passed or the scenario is upstream's.
    """
    if scenario.meta is None:
        return None
    if not failures:
        clear_pending(scenario, store)
        return None
    files = fixture_files(scenario, logs, frames)
    allowed = {(e.file, e.hash) for e in scenario.meta.secrets_allowlist}
    folder = _root(scenario) / store
    for name, text in files.items():
        flagged = [
            f for f in scan_text(text, folder / name, name) if (f.file, f.hash) not in allowed
        ]
        if flagged:
            return f"pending outputs not kept: the key scan flagged {flagged[0]}"
    return _write_pending(scenario, store, files, failures, acceptable, agent, drift)


def keep_failure(
    scenario: Scenario,
    store: str,
    failures: Sequence[str],
    agent: Sequence[str] | None = None,
    drift: Sequence[str] = (),
) -> str | None:
    """After a replay that failed before it had outputs to compare (the agent stopped, the
    proxy refused a drifted request): keep its failures without outputs, so that ``review``
    says why it failed rather than "every replay passed", and ``accept`` refuses it.

    Returns:
        a note when they could not be kept, else ``None`` (the failures say enough).
    """
    if scenario.meta is None or not failures:
        return None
    note = _write_pending(scenario, store, {}, failures, False, agent, drift)
    return note if note and note.startswith("pending outputs not kept") else None


def _write_pending(
    scenario: Scenario,
    store: str,
    files: Mapping[str, str],
    failures: Sequence[str],
    acceptable: bool,
    agent: Sequence[str] | None,
    drift: Sequence[str] = (),
) -> str:
    folder = _root(scenario) / store
    manifest = {
        "version": _FORMAT,
        "store": store,
        "acceptable": acceptable,
        "failures": list(failures),
        "inputs": _inputs(scenario),
        "files": sorted(files),
        "agent": None if agent is None else list(agent),
        "drift": list(drift),
    }
    if pending_tracked(scenario):
        return f"pending outputs not kept: git tracks {_root(scenario)}"
    try:
        clear_pending(scenario, store)
        base, rel = scenario.path, f"{ScenarioFiles.PENDING}/{store}"
        for name, text in files.items():
            fsafe.write_bytes(base, f"{rel}/{name}", text.encode("utf-8"))
        # The manifest last: a folder without one is an interrupted write, never read.
        data = (json.dumps(manifest, indent=1) + "\n").encode("utf-8")
        fsafe.write_bytes(base, f"{rel}/{MANIFEST}", data)
    except (OSError, fsafe.ConfinedPathError) as exc:
        return f"pending outputs not kept in {folder}: {exc}"
    return (
        f"actual outputs kept in {folder}: `dsh-snapshot review {scenario.path}` shows and "
        "accepts them"
    )


def _fixture_name(index: int, value: object) -> str:
    """A manifest's ``files[index]``: a fixture's plain name, or the error naming the field."""
    name = str(value)
    if not _FIXTURE_NAME.fullmatch(name):
        raise ValueError(
            f"field 'files.{index}' is {name!r}: pending outputs are fixture files of the "
            "scenario (session*.jsonl, stdout*.jsonl), never another path"
        )
    return name


def _load_one(scenario: Scenario, folder: Path) -> Pending:
    source = folder / MANIFEST
    base, rel = scenario.path, f"{ScenarioFiles.PENDING}/{folder.name}"
    try:
        raw: Any = loads_bounded(fsafe.read_text(base, f"{rel}/{MANIFEST}", _MAX_MANIFEST))
        if not isinstance(raw, dict) or raw.get("version") != _FORMAT:  # pyright: ignore[reportUnknownMemberType]
            raise ValueError(f"not a version {_FORMAT} manifest")
        manifest: dict[str, Any] = raw  # pyright: ignore[reportUnknownVariableType]
        names = [_fixture_name(i, n) for i, n in enumerate(manifest["files"])]
        files = {n: fsafe.read_text(base, f"{rel}/{n}") for n in names}
        agent = manifest.get("agent")
        return Pending(
            scenario,
            str(manifest["store"]),
            folder,
            files,
            tuple(str(f) for f in manifest["failures"]),
            bool(manifest["acceptable"]),
            {str(k): str(v) for k, v in dict(manifest["inputs"]).items()},
            None if agent is None else tuple(str(a) for a in agent),
            tuple(str(d) for d in manifest.get("drift") or ()),
        )
    except (OSError, ValueError, KeyError, TypeError, fsafe.ConfinedPathError) as exc:
        raise PendingError(
            f"{source}: unreadable pending outputs ({exc}); replay the scenario again "
            f"(dsh-snapshot replay {scenario.path}) to write them afresh"
        ) from None


def load_pending(scenario: Scenario) -> list[Pending]:
    """A scenario's pending outputs, one per store that failed (``jsonl`` first).

    Raises:
        PendingError: a manifest is unreadable.
    """
    root = _root(scenario)
    if os.path.islink(root) or not root.is_dir():
        return []
    if pending_tracked(scenario):
        print(
            f"dsh-snapshot: {root} ignored: git tracks it, so it came with the checkout, "
            "not from a replay here",
            file=sys.stderr,
        )
        return []
    folders = sorted(
        (p for p in root.iterdir() if not p.is_symlink() and os.path.lexists(p / MANIFEST)),
        key=lambda p: (p.name != "jsonl", p.name),
    )
    return [_load_one(scenario, folder) for folder in folders]


def pending_tracked(scenario: Scenario) -> bool:
    """Whether git tracks anything under the scenario's ``.pending/`` (no git: False).

    Pending outputs are written by a replay on this machine and ignored by git; tracked
    ones arrived with the checkout (a pull request's choice of outputs to accept) and are
    never read or written.
    """
    done = run_git(scenario.path, "ls-files", "-z", "--", ScenarioFiles.PENDING)
    if done is None:
        return False  # no git, or no work tree around the scenario: nothing can be tracked
    # Inside a work tree git must answer; a failing git is taken as "tracked" (fail closed):
    # an error must never make a pull request's .pending/ look like this machine's own.
    return done.returncode != 0 or bool(done.stdout)

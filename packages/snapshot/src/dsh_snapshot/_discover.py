"""Finding scenarios: every folder holding ``input.json`` under the given paths.

A malformed folder becomes a :class:`BrokenScenario` (one failed row of a batch report) so the
others still run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dsh_core import ScenarioFiles
from dsh_snapshot._scenario import Scenario, ScenarioError, load_scenario

__all__ = [
    "BrokenScenario",
    "DiscoveryTimeoutError",
    "discover",
    "discover_each",
    "scenario_folders",
    "scenario_root",
]


class DiscoveryTimeoutError(ScenarioError):
    """Discovery did not finish within ``--timeout`` (a tree too large, or built to be)."""


def scenario_folders(folder: Path, deadline: float | None = None) -> Iterator[Path]:
    """Every folder holding ``input.json`` at or below ``folder`` (never inside one).

    A symlinked directory below ``folder`` is never entered: a checkout's ``snapshots/x ->
    ~/`` must not make ``refresh`` write there, and a link to a parent must not loop.

    Raises:
        DiscoveryTimeoutError: ``deadline`` (``time.monotonic()``) passed before the walk ended.
    """
    yield from _walk(folder, deadline, [0])


# The clock is looked at once per this many folders: a small tree is never cut short by a
# scheduler's hiccup, a large one is stopped within a few milliseconds of its deadline.
_CHECK_EVERY = 64


def _walk(folder: Path, deadline: float | None, walked: list[int]) -> Iterator[Path]:
    walked[0] += 1
    if deadline is not None and walked[0] % _CHECK_EVERY == 0 and time.monotonic() > deadline:
        raise DiscoveryTimeoutError(folder, None, "discovery did not finish within --timeout")
    if os.path.lexists(folder / ScenarioFiles.INPUT):
        yield folder
        return  # a scenario's workspace/ may hold anything; never look inside
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
            yield from _walk(Path(entry.path), deadline, walked)


def discover(paths: Iterable[Path]) -> list[Scenario]:
    """Every scenario folder at or below the given paths, sorted by name, without duplicates.

    Raises:
        ScenarioError: a path does not exist, or a scenario folder is malformed.
    """
    scenarios, broken = discover_each(paths)
    if broken:
        raise broken[0].error
    return scenarios


def scenario_root(path: Path) -> Path:
    """The folder a given path stands for: itself, or the scenario folder holding a file.

    ``replay snapshots/sdk/x/input.json`` means the scenario ``snapshots/sdk/x``.

    A path that is, or passes through, a symbolic link below the working directory is refused:
    the user names ``snapshots``, but the checkout decides what ``snapshots`` is, and a link
    there would make ``refresh`` write into another tree (or walk ``/``).

    Raises:
        ScenarioError: the path does not exist, is or passes through such a link, or is a file
            outside any scenario folder.
    """
    if (link := _link_on_the_way(path)) is not None:
        raise ScenarioError(
            link,
            None,
            f"a symbolic link (to {os.readlink(link)}); the gate never follows a link into "
            "the scenario tree: name the real folder",
        )
    if path.is_dir():
        return path.resolve()
    if path.is_file() and (path.parent / ScenarioFiles.INPUT).is_file():
        return path.parent.resolve()
    if path.is_file():
        raise ScenarioError(
            path, None, f"a file outside any scenario folder (no {ScenarioFiles.INPUT})"
        )
    raise ScenarioError(path, None, "no such scenario folder")


def _link_on_the_way(path: Path) -> Path | None:
    """The first link among ``path``'s components inside the working directory, if any.

    Components above the working directory (``/tmp`` on macOS, a home on another disk) are the
    machine's, not the checkout's, and are taken as they are.
    """
    here = Path.cwd()
    full = path if path.is_absolute() else here / path
    if full.is_relative_to(here):
        parts, walked = full.relative_to(here).parts, here
    else:
        parts, walked = (full.name,), full.parent
    for part in parts:
        walked = walked / part
        if walked.is_symlink():
            return walked
    return None


@dataclass(frozen=True)
class BrokenScenario:
    """A scenario folder that failed to load: reported as one failed row, never run.

    Attributes:
        path: the scenario folder.
        error: what is wrong, naming the file and field.
    """

    path: Path
    error: ScenarioError

    @property
    def name(self) -> str:
        """``profile/name`` as far as the folder tells (its snapshot.yml may be the broken part)."""
        return f"{self.path.parent.name}/{self.path.name}"


def discover_each(
    paths: Iterable[Path], timeout: float | None = None
) -> tuple[list[Scenario], list[BrokenScenario]]:
    """Like :func:`discover`, but a malformed scenario folder is returned as its error instead of
    raised, so a batch can report it as one failed row and go on with the others.

    Args:
        paths: what to look in.
        timeout: seconds the whole discovery (the walk and every ``snapshot.yml`` and
            ``input.json`` read) may take; ``None``: no bound.

    Raises:
        ScenarioError: a given path does not exist (nothing to run at all), or is reached
            through a symbolic link.
        DiscoveryTimeoutError: discovery took longer than ``timeout``.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    seen: dict[Path, Scenario | BrokenScenario] = {}
    late = f"discovery did not finish within --timeout {timeout:g} s" if timeout else ""
    try:
        folders = [f for path in paths for f in scenario_folders(scenario_root(path), deadline)]
    except DiscoveryTimeoutError as exc:
        raise DiscoveryTimeoutError(exc.path, None, late) from None
    for index, folder in enumerate(folders):
        # Each load is bounded by the file caps; the clock is looked at from the second on.
        if index and deadline is not None and time.monotonic() > deadline:
            raise DiscoveryTimeoutError(folder, None, late)
        if folder not in seen:
            try:
                seen[folder] = load_scenario(folder)
            except ScenarioError as exc:
                seen[folder] = BrokenScenario(folder, exc)
    scenarios = [s for s in seen.values() if isinstance(s, Scenario)]
    broken = [b for b in seen.values() if isinstance(b, BrokenScenario)]
    return sorted(scenarios, key=lambda s: (s.name, str(s.path))), broken

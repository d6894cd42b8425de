"""Confinement of a scenario to its run: the workspace copy and every path a scenario names.

A scenario folder arrives in a pull request, so everything in it is untrusted. Before the agent
starts:

- ``workspace/`` is copied without following a single symlink. A link whose target (resolved
  inside the source workspace) stays inside the workspace is recreated as a *relative* link in
  the copy, so it points at the copy and never back at the scenario; a link that leads out
  (a file or directory elsewhere, ``$HOME``, ``/``), dangles or loops is refused, as is
  anything that is not a file, directory or link (FIFOs, sockets, devices).
- Every file of the scenario folder itself must be what it claims: a link there that leads out
  of the folder is refused (``session.jsonl -> ~/.ssh/id_rsa`` would be read into the run).
- Every path ``input.json`` names (``cwd``, ``waitForFile.path``, ``additionalDirectories``, …)
  and ``replay.override.json``'s ``readyFile`` must resolve inside the run's cwd.

Each refusal is a :class:`ConfinementError` naming the file and the field or entry.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from dsh_llm_replay import OverrideError, load_override
from dsh_snapshot._scenario import Scenario, ScenarioError, step_paths

__all__ = [
    "ConfinementError",
    "check_scenario_links",
    "check_step_paths",
    "checkout_roots",
    "hidden_from_commands",
    "copy_workspace",
    "inside",
]


class ConfinementError(ScenarioError):
    """A scenario names something outside its run; the message names the file and field."""


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` is ``root`` or beneath it (both already resolved)."""
    return path == root or root in path.parents


def _link_target(link: Path, root: Path, what: str) -> Path:
    """Where a link inside ``root`` really points, or a :class:`ConfinementError`."""
    try:
        real = link.resolve(strict=True)
    except RuntimeError:  # Python 3.11 reports a loop this way
        raise ConfinementError(link, None, f"{what}: a symlink loop") from None
    except OSError as exc:
        raise ConfinementError(
            link, None, f"{what}: a symlink that does not resolve ({exc.strerror})"
        ) from None
    if not inside(real, root):
        raise ConfinementError(
            link,
            None,
            f"{what}: a symlink to {os.readlink(link)!r}, which leads outside "
            f"{root.name}/ (to {real}); a scenario may not reach outside its run",
        )
    return real


def copy_workspace(source: Path, target: Path) -> int:
    """Copy ``source`` (a scenario's ``workspace/``) to ``target`` without following links.

    Returns:
        the number of entries copied.

    Raises:
        ConfinementError: naming the first entry that is a link leading out, a dangling or
            looping link, or a special file; ``target`` is then removed again.
    """
    if source.is_symlink():
        raise ConfinementError(
            source, None, "workspace/ is itself a symlink; it must be a real directory"
        )
    root = source.resolve()
    count = 0
    target.mkdir()
    try:
        stack = [(source, target)]
        while stack:
            src_dir, dst_dir = stack.pop()
            for entry in sorted(os.scandir(src_dir), key=lambda e: e.name):
                src, dst = Path(entry.path), dst_dir / entry.name
                rel = src.relative_to(source).as_posix()
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    real = _link_target(src, root, f"workspace entry {rel!r}")
                    relative = os.path.relpath(target / real.relative_to(root), dst.parent)
                    dst.symlink_to(relative)
                elif stat.S_ISDIR(mode):
                    dst.mkdir()
                    stack.append((src, dst))
                elif stat.S_ISREG(mode):
                    shutil.copy2(src, dst, follow_symlinks=False)
                else:
                    raise ConfinementError(
                        src,
                        None,
                        f"workspace entry {rel!r} is not a file, directory or symlink",
                    )
                count += 1
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return count


def check_scenario_links(scenario: Scenario) -> None:
    """Refuse a top-level entry of the scenario folder that is a link leading out of it.

    (``workspace/`` is checked entry by entry when it is copied.)

    Raises:
        ConfinementError: naming the entry.
    """
    root = scenario.path.resolve()
    for entry in sorted(scenario.path.iterdir()):
        if entry.is_symlink():
            _link_target(entry, root, f"scenario entry {entry.name!r}")


def check_step_paths(scenario: Scenario, cwd: Path) -> None:
    """Every path ``input.json`` and ``replay.override.json`` name, resolved under the run's
    ``cwd`` (after the workspace copy, so a link inside it is taken into account).

    Raises:
        ConfinementError: naming ``input.json`` and ``steps.N.<field>``, or the override and
            ``[i].readyFile``.
    """
    root = cwd.resolve()
    input_file = scenario.files.input
    for index, step in enumerate(scenario.steps):
        for field, value in step_paths(step):
            _check_in_cwd(root, value, input_file, f"steps.{index}.{field}")
    override = scenario.override_file
    if override is None:
        return
    try:
        document = load_override(override)
    except OverrideError as exc:
        raise ConfinementError(override, exc.location, exc.reason) from None
    labelled = (
        [(f"[{i}]", entry) for i, entry in enumerate(document.replace)]
        if document.replace is not None
        else [(f"patches[{n}].entry", entry) for n, (_, entry) in enumerate(document.patches)]
    )
    for label, entry in labelled:
        ready = getattr(entry, "ready_file", None)
        if isinstance(ready, str):
            _check_in_cwd(root, ready, override, f"{label}.readyFile")


def _check_in_cwd(root: Path, value: str, file: Path, location: str) -> None:
    """Refuse a path the scenario names (at ``file``'s ``location``) that leaves ``root``."""
    real = (root / value).resolve()
    if not inside(real, root):
        raise ConfinementError(
            file, location, f"{value!r} resolves to {real}, outside the run's working directory"
        )


def hidden_from_commands(scenario: Path, cwd: Path) -> list[str]:
    """What the sandbox hides from a run's commands beyond its fixed list: the git checkouts
    the scenario and the gate's cwd lie in (:func:`checkout_roots`) and the cwd itself, where
    ``record`` reads ``.env``, whether or not it is a checkout. A cwd too wide to hide (``/``,
    a top-level folder, the home or one above it) has its ``.env*`` files hidden instead."""
    hidden = checkout_roots([scenario, cwd])
    here = os.path.realpath(cwd)
    home = os.path.realpath(os.path.expanduser("~"))
    wide = len(Path(here).parts) <= 2 or here == home or home.startswith(here.rstrip("/") + "/")
    if not wide:
        if here not in hidden:
            hidden.append(here)
    else:
        with contextlib.suppress(OSError):
            hidden += [
                os.path.join(here, name)
                for name in sorted(os.listdir(here))
                if name.startswith(".env") and not os.path.islink(os.path.join(here, name))
            ]
    return hidden


def checkout_roots(paths: Iterable[Path]) -> list[str]:
    """The git checkouts ``paths`` lie in (the nearest folder above each holding ``.git``),
    for the sandbox to hide: a checkout keeps ``.env`` (the README puts the key there) and
    ``.git`` (a CI checkout's persisted token), which no command of a run may read. ``/`` and
    the home folder itself are never listed (too wide to hide; their secrets are hidden one by
    one)."""
    home = os.path.realpath(os.path.expanduser("~"))
    found: list[str] = []
    for path in paths:
        here = Path(os.path.realpath(path))
        for folder in (here, *here.parents):
            if os.path.lexists(folder / ".git"):
                for tree in (folder, _main_worktree(folder / ".git")):
                    text = str(tree) if tree is not None else ""
                    if text and text not in ("/", home) and text not in found:
                        found.append(text)
                break
    return found


def _main_worktree(dot_git: Path) -> Path | None:
    """For a linked worktree (``.git`` is a file ``gitdir: <common>/worktrees/<name>``), the
    main working tree, which holds the shared ``.git`` (its config, a CI token) and usually
    the README's ``.env``; ``None`` otherwise."""
    try:
        if not dot_git.is_file() or dot_git.is_symlink():
            return None
        text = dot_git.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text.split(":", 1)[1].strip().splitlines()[0])
    if not gitdir.is_absolute():
        gitdir = dot_git.parent / gitdir
    common = gitdir
    try:
        relative = (gitdir / "commondir").read_text(encoding="utf-8").strip()
        common = gitdir / relative
    except OSError:
        pass
    common = Path(os.path.realpath(common))
    return common.parent if common.name == ".git" else None

"""Publishing new fixtures: staged, scanned, then moved into place only when clean.

Every writer of a scenario folder (record, scripted record, refresh) goes through
:func:`publish_fixtures`. The new files are written into a private staging folder in the system
temp directory (never into the repository, so a dirty recording leaves no key in the working
tree even after a crash), the key scan runs there with the scenario's allow-list, and only a
clean scan lets them in: each file whose bytes changed is replaced atomically
(``dsh_core.atomic_write``), then stale files are removed. A dirty scan raises
:class:`DirtyRecordingError`, whose message names file, line and kind with the value masked,
and the committed fixtures stay exactly as they were.
"""

from __future__ import annotations

import fnmatch
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from dsh_core import DshError, ScenarioFiles
from dsh_snapshot import _fsafe as fsafe
from dsh_snapshot._keyscan import KeyFinding, scan_folder
from dsh_snapshot._scenario import AllowEntry

__all__ = ["DirtyRecordingError", "publish_fixtures"]


class DirtyRecordingError(DshError):
    """The key scan flagged staged fixtures; nothing was published.

    Attributes:
        folder: the scenario folder that was left untouched.
        findings: what the scan found (file, line, kind, hash; never the value).
    """

    def __init__(self, folder: Path, findings: Sequence[KeyFinding]) -> None:
        self.folder = folder
        self.findings = tuple(findings)
        listed = "\n".join(f"  {f}" for f in self.findings)
        super().__init__(
            f"{folder}: the new fixtures were NOT written: the key scan flagged "
            f"{len(self.findings)} value(s) in them (the committed fixtures are unchanged):\n"
            f"{listed}"
        )


def _check_name(name: str) -> None:
    posix = PurePosixPath(name)
    if posix.is_absolute() or ".." in posix.parts or len(posix.parts) != 1:
        raise ValueError(f"fixture name {name!r} must be a plain file name inside the scenario")


def publish_fixtures(
    folder: Path,
    files: Mapping[str, str | bytes],
    *,
    prune: Sequence[str] = (ScenarioFiles.CHILD_GLOB,),
    allowlist: Sequence[AllowEntry] = (),
    literals: Iterable[str] = (),
) -> list[str]:
    """Stage ``files`` (name → content) for ``folder``, scan them, and publish them if clean.

    Args:
        folder: the scenario folder.
        files: the complete new set of fixture files, by plain file name.
        prune: globs of files that belong to the set: an existing one not in ``files`` is
            stale and removed, but only after a clean publish.
        allowlist: the scenario's reviewed false positives (``secrets_allowlist``).
        literals: values that must appear nowhere (the live key of a record run).

    Returns:
        the names whose bytes changed (``-name`` for a removed stale file), sorted.

    Raises:
        DirtyRecordingError: the scan flagged a staged file; nothing in ``folder`` changed.
        ValueError: a name is not a plain file name.
        OSError: writing failed (files already replaced stay replaced, each one whole).
    """
    for name in files:
        _check_name(name)
    staging = Path(tempfile.mkdtemp(prefix="dsh-staging-"))
    try:
        for name, content in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            (staging / name).write_bytes(data)
        findings = scan_folder(staging, allowlist, literals, display=folder, report_stale=False)
        if findings:
            raise DirtyRecordingError(folder, findings)
        changed: list[str] = []
        for name in files:
            data = (staging / name).read_bytes()
            try:
                same = fsafe.read_bytes(folder, name) == data
            except (OSError, fsafe.ConfinedPathError):  # absent, a link, not a file: replace it
                same = False
            if not same:
                fsafe.write_bytes(folder, name, data)
                changed.append(name)
        for entry in sorted(folder.iterdir()):
            if entry.name not in files and any(fnmatch.fnmatch(entry.name, p) for p in prune):
                entry.unlink()
                changed.append(f"-{entry.name}")
        return sorted(changed)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

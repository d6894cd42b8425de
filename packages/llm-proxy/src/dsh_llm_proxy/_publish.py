"""Replacing a recording root only once the new one is complete: never lose the old one.

A new recording is written into a scratch folder beside the old one (same filesystem, so the
swap is two renames); only a complete, clean recording replaces the old, which is removed
last. Anything else removes the scratch folder and leaves the old recording as it was.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

__all__ = ["publish_recording", "scratch_root"]


def scratch_root(folder: Path) -> Path:
    """A fresh, not yet existing folder beside ``folder`` to record into."""
    return folder.parent / f".{folder.name}.new-{secrets.token_hex(4)}"


def publish_recording(scratch: Path, folder: Path, *, keep: bool) -> None:
    """Move ``scratch`` into ``folder``'s place when ``keep``, else remove it.

    The old ``folder`` is renamed aside first and removed only after the new one is in place,
    so at every moment one complete recording exists under one of the two names.
    """
    if not keep:
        shutil.rmtree(scratch, ignore_errors=True)
        return
    scratch.parent.mkdir(parents=True, exist_ok=True)
    old = folder.parent / f".{folder.name}.old-{secrets.token_hex(4)}"
    if folder.exists():
        folder.rename(old)
    scratch.mkdir(parents=True, exist_ok=True)  # a test that made no call wrote nothing
    scratch.rename(folder)
    shutil.rmtree(old, ignore_errors=True)

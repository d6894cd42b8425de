"""Helpers for tests that read the upstream recordings and compare logs with them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh_core._events import Event, SessionHeader
from dsh_core._logformat import SessionLog
from dsh_core._normalize import log_normalizer, normalize_log

__all__ = ["normalized_rows", "upstream_corpus"]


def upstream_corpus(near: str | Path) -> Path | None:
    """Where the upstream corpus is: ``$DSH_UPSTREAM_CORPUS``, else the first
    ``shared/upstream-corpus`` beside an ancestor of ``near`` (a checkout keeps ``shared/``
    next to it); ``None`` when there is none, so the caller can skip saying so."""
    configured = os.environ.get("DSH_UPSTREAM_CORPUS")
    if configured:
        return Path(configured)
    for parent in Path(near).resolve().parents:
        candidate = parent / "shared" / "upstream-corpus"
        if candidate.is_dir():
            return candidate
    return None


def normalized_rows(header: SessionHeader, events: Sequence[Event]) -> list[dict[str, Any]]:
    """A log as wire objects normalised by upstream's flat scheme (:func:`dsh_core.Normalizer`:
    ids, parent id and any UUID → ``{{sessionId}}``, cwd → ``{{cwd}}``, every
    ``createdAt``/``time`` 0), so logs recorded at other times and places compare."""
    log = SessionLog(header, list(events))
    return normalize_log(log, log_normalizer([log], tree=False))

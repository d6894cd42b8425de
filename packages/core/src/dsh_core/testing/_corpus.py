"""Helpers for tests that read the upstream recordings and compare logs with them."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh_core._events import Event, SessionHeader

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
    """A log as wire objects with its id, parent id and cwd replaced by placeholders and every
    ``createdAt``/``time`` set to 0, so logs recorded at other times and places compare."""
    rows = [header.to_json(), *(event.to_json() for event in events)]
    text = json.dumps(rows)
    replacements = {header.id: "{{sessionId}}"}
    if header.parent_session:
        replacements[header.parent_session] = "{{sessionId}}"
    if header.cwd:
        replacements[header.cwd] = "{{cwd}}"
    for old, new in replacements.items():
        text = text.replace(json.dumps(old)[1:-1], new)
    out: list[dict[str, Any]] = json.loads(text)
    out[0]["createdAt"] = 0
    for row in out[1:]:
        row["time"] = 0
    return out

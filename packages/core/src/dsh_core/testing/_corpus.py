"""Helpers for tests that read the upstream recordings and compare logs with them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from dsh_core._events import Event, SessionHeader
from dsh_core._logformat import SessionLog
from dsh_core._normalize import log_normalizer, normalize_log

__all__ = ["corpus_cache", "corpus_unavailable", "normalized_rows", "upstream_corpus"]


def corpus_cache() -> Path:
    """Where ``tools/fetch_upstream_corpus.py`` puts the corpus: ``$DSH_UPSTREAM_CACHE``, else
    ``$XDG_CACHE_HOME/dsh-py/upstream-corpus`` (``~/.cache`` when unset)."""
    configured = os.environ.get("DSH_UPSTREAM_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dsh-py" / "upstream-corpus"


def upstream_corpus(near: str | Path) -> Path | None:
    """Where the upstream corpus is: ``$DSH_UPSTREAM_CORPUS``, else the first
    ``shared/upstream-corpus`` beside an ancestor of ``near`` (a checkout keeps ``shared/``
    next to it), else the cache ``tools/fetch_upstream_corpus.py`` fills
    (:func:`corpus_cache`); ``None`` when there is none, so the caller can say so through
    :func:`corpus_unavailable`."""
    configured = os.environ.get("DSH_UPSTREAM_CORPUS")
    if configured:
        return Path(configured)
    for parent in Path(near).resolve().parents:
        candidate = parent / "shared" / "upstream-corpus"
        if candidate.is_dir():
            return candidate
    cache = corpus_cache()
    if any((cache / era).is_dir() for era in ("june", "head")):
        return cache
    return None


def corpus_unavailable(reason: str) -> NoReturn:
    """Skip a test that needs the upstream corpus, saying how to get it; under ``CI=true``
    fail it instead: CI has the corpus, so a missing one there is a broken setup, not a
    reason to pass quietly."""
    import pytest  # noqa: PLC0415 (a test dependency only; this module loads without it)

    hint = "(run tools/fetch_upstream_corpus.py, or set DSH_UPSTREAM_CORPUS)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} {hint}; CI=true: a test that needs the corpus fails here")
    pytest.skip(f"{reason} {hint}")


def normalized_rows(header: SessionHeader, events: Sequence[Event]) -> list[dict[str, Any]]:
    """A log as wire objects normalised by upstream's flat scheme (:func:`dsh_core.Normalizer`:
    ids, parent id and any UUID → ``{{sessionId}}``, cwd → ``{{cwd}}``, every
    ``createdAt``/``time`` 0), so logs recorded at other times and places compare."""
    log = SessionLog(header, list(events))
    return normalize_log(log, log_normalizer([log], tree=False))

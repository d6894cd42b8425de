"""Fixtures shared by the dsh-llm-replay tests: the upstream corpus and the anyio backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core.testing import corpus_unavailable, upstream_corpus


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def corpus() -> Path:
    """``$DSH_UPSTREAM_CORPUS`` (default ``../shared/upstream-corpus`` beside the checkout)."""
    root = upstream_corpus(__file__) or Path("upstream-corpus (not found)")
    if not (root / "june").is_dir():
        corpus_unavailable(f"upstream corpus {root} is absent (set DSH_UPSTREAM_CORPUS)")
    return root

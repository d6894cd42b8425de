"""Fixtures shared by the dsh-llm-replay tests: the upstream corpus and the anyio backend."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def corpus() -> Path:
    """``$DSH_UPSTREAM_CORPUS`` (default ``../shared/upstream-corpus`` beside the checkout)."""
    default = Path(__file__).resolve().parents[3].parent / "shared" / "upstream-corpus"
    root = Path(os.environ.get("DSH_UPSTREAM_CORPUS", default))
    if not (root / "june").is_dir():
        pytest.skip(f"upstream corpus {root} is absent (set DSH_UPSTREAM_CORPUS)")
    return root

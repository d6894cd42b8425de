"""A package's public API, pinned by its tests: a change to an ``__all__`` must be deliberate."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

__all__ = ["assert_public_api"]


def assert_public_api(module_name: str, pinned: Sequence[str]) -> None:
    """Fail unless ``module_name``'s ``__all__`` is exactly ``pinned`` (sorted), lists no name
    twice, and every name in it exists on the module."""
    module = importlib.import_module(module_name)
    declared: list[str] = list(module.__all__)
    assert sorted(declared) == list(pinned)
    assert len(set(declared)) == len(declared)  # no name listed twice
    for public in declared:
        assert hasattr(module, public), public

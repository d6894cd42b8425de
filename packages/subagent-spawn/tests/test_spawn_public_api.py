"""dsh-subagent-spawn's public API, pinned: a change to an ``__all__`` must be deliberate."""

from __future__ import annotations

import importlib

import pytest

_PUBLIC: dict[str, list[str]] = {
    "dsh_subagent_spawn": [
        "SPAWN_TOOL_DESCRIPTION",
        "SpawnBackend",
    ],
}


@pytest.mark.parametrize("name", list(_PUBLIC))
def test_public_names_are_pinned(name: str) -> None:
    declared: list[str] = list(importlib.import_module(name).__all__)
    assert sorted(declared) == _PUBLIC[name]
    assert len(set(declared)) == len(declared)  # no name listed twice
    module = importlib.import_module(name)
    for public in declared:
        assert hasattr(module, public), public

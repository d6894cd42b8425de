"""dsh-subagent-spawn's public API, pinned: a change to an ``__all__`` must be deliberate."""

from __future__ import annotations

import pytest

from dsh_core.testing import assert_public_api

_PUBLIC: dict[str, list[str]] = {
    "dsh_subagent_spawn": [
        "SPAWN_TOOL_DESCRIPTION",
        "SpawnBackend",
    ],
}


@pytest.mark.parametrize("name", list(_PUBLIC))
def test_public_names_are_pinned(name: str) -> None:
    assert_public_api(name, _PUBLIC[name])

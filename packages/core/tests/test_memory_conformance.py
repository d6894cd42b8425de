"""The conformance suite run against the in-memory store: checks the suite as much as the store."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsh_core import SessionStore
from dsh_core.testing import InMemorySessionStore, StoreConformance


class TestMemoryConformance(StoreConformance):
    @pytest.fixture
    def store_factory(self) -> Callable[[], SessionStore]:
        # one dict shared by every "instance": the in-memory store has no location
        shared = InMemorySessionStore()
        return lambda: shared

"""The shared store conformance suite, run against ``PostgresSessionStore`` on a real server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core import SessionStore
from dsh_core.testing import StoreConformance
from dsh_persistence_postgres import PostgresSessionStore, PostgresSettings


class TestPostgresConformance(StoreConformance):
    @pytest.fixture
    def store_factory(
        self, tmp_path: Path, settings: PostgresSettings
    ) -> Callable[[], SessionStore]:
        # every test its own root, so its own namespace in the worker's one database
        return lambda: PostgresSessionStore(tmp_path / "sessions", settings)

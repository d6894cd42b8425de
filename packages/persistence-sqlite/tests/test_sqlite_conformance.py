"""The shared store conformance suite, run against ``SqliteSessionStore``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core import SessionStore
from dsh_core.testing import StoreConformance
from dsh_persistence_sqlite import SqliteSessionStore


class TestSqliteConformance(StoreConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[[], SessionStore]:
        return lambda: SqliteSessionStore(tmp_path / "sessions.sqlite3")

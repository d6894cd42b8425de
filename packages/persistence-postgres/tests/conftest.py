"""A real PostgreSQL server per test process (so per xdist worker), started once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsh_persistence_postgres import PostgresSettings
from dsh_persistence_postgres.testing import server_for_tests


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The DSN of this worker's server (skips, saying how to install PostgreSQL, without one)."""
    with server_for_tests() as dsn:
        yield dsn


@pytest.fixture
def settings(postgres_dsn: str, monkeypatch: pytest.MonkeyPatch) -> PostgresSettings:
    """The server's settings; also in the environment, for the registry and subprocesses."""
    monkeypatch.setenv("DSH_POSTGRES_DSN", postgres_dsn)
    return PostgresSettings(dsn=postgres_dsn)

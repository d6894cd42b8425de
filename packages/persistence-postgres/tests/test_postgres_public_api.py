"""The public surface of dsh_persistence_postgres, pinned (a change here is a decision)."""

from __future__ import annotations

from dsh_core.testing import assert_public_api


def test_the_package_exports() -> None:
    assert_public_api(
        "dsh_persistence_postgres",
        ["PostgresSessionStore", "PostgresSettings", "SCHEMA_VERSION"],
    )


def test_the_testing_module_exports() -> None:
    assert_public_api(
        "dsh_persistence_postgres.testing",
        [
            "EXTERNAL_DSN_ENV",
            "INSTALL_HINT",
            "PostgresNotInstalledError",
            "TemporaryPostgres",
            "find_postgres_bindir",
            "main",
            "server_for_tests",
        ],
    )

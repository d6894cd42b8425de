"""The public surface of dsh_persistence_postgres, pinned (a change here is a decision)."""

from __future__ import annotations

import subprocess
import sys

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


def test_looking_the_backend_up_does_not_import_psycopg() -> None:
    # Every gate resolves the installed backends (its default set is the embedded ones):
    # psycopg (~50 ms of CPU) is imported only when the store is used.
    code = (
        "import sys\n"
        "from dsh_core.plugins import default_store_backend_names, store_backend\n"
        "assert 'postgres' not in default_store_backend_names()\n"
        "assert not store_backend('postgres').embedded\n"
        "assert 'psycopg' not in sys.modules, 'imported'\n"
        "from dsh_persistence_postgres import PostgresSessionStore\n"
        "assert 'psycopg' in sys.modules and PostgresSessionStore.__name__\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

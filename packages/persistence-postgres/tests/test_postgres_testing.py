"""The test server helper itself: a command run beside a private server, then nothing left."""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg
import pytest

from dsh_persistence_postgres import testing
from dsh_persistence_postgres.testing import (
    EXTERNAL_DSN_ENV,
    TemporaryPostgres,
    find_postgres_bindir,
    main,
    server_for_tests,
)

_PROBE = """
import os, sys
import psycopg
dsn = os.environ["DSH_POSTGRES_DSN"]
with psycopg.connect(dsn) as connection:
    assert connection.execute("SELECT 1").fetchone() == (1,)
open(sys.argv[1], "w").write(dsn)
sys.exit(5)
"""


def test_main_runs_a_command_with_the_servers_dsn_and_stops_it(
    postgres_dsn: str, tmp_path: Path
) -> None:
    if find_postgres_bindir() is None:
        pytest.skip("an external server (DSH_TEST_POSTGRES_DSN): no initdb to test here")
    seen = tmp_path / "dsn"
    assert main([sys.executable, "-c", _PROBE, str(seen)]) == 5  # its exit code, passed on
    dsn = seen.read_text()
    assert dsn.startswith("host=")
    folder = Path(dsn.split()[0].removeprefix("host=")).parent
    assert not folder.exists()  # the server's folder went with it
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=2).close()


def test_main_without_a_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: python -m dsh_persistence_postgres.testing COMMAND" in capsys.readouterr().err


def test_a_folder_without_initdb_fails_saying_so_and_leaves_nothing(tmp_path: Path) -> None:
    server = TemporaryPostgres(bindir=tmp_path)
    with pytest.raises(RuntimeError, match="initdb failed"), server:
        pass
    assert not server.folder.exists()


def _not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    # PostgreSQL is installed here; where it is not, discovery finds nothing, as this does.
    monkeypatch.setattr(testing, "find_postgres_bindir", lambda: None)
    monkeypatch.delenv(EXTERNAL_DSN_ENV, raising=False)


def test_without_postgresql_the_tests_skip_saying_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _not_installed(monkeypatch)
    monkeypatch.delenv("CI", raising=False)
    with (
        pytest.raises(pytest.skip.Exception, match=r"apt-get install postgresql"),
        server_for_tests(),
    ):
        pass


def test_without_postgresql_under_ci_the_tests_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    _not_installed(monkeypatch)
    monkeypatch.setenv("CI", "true")
    failed = pytest.raises(pytest.fail.Exception, match=r"CI=true and PostgreSQL is not installed")
    with failed, server_for_tests():
        pass


def test_an_external_server_is_used_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    _not_installed(monkeypatch)  # nothing is started: the named server is the one
    monkeypatch.setenv(EXTERNAL_DSN_ENV, "host=db.example port=5432")
    with server_for_tests() as dsn:
        assert dsn == "host=db.example port=5432"

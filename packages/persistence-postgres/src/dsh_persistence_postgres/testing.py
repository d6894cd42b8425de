"""A real PostgreSQL server for tests: ``initdb`` and ``pg_ctl`` into a temporary folder.

``python -m dsh_persistence_postgres.testing COMMAND…`` runs a command with
``DSH_POSTGRES_DSN`` naming such a server, and stops the server after it (``nox -s
snapshot_postgres`` runs the gate that way).

:class:`TemporaryPostgres` starts a private server of the installed PostgreSQL (Debian's
``postgresql`` package puts it under ``/usr/lib/postgresql/<version>/bin``) that listens only
on a Unix socket in its own folder, on a free port number, and removes everything when
stopped. ``initdb`` refuses to run as root; as root the server runs as the ``postgres`` user
(or ``nobody``) through ``runuser``, and its folder is handed to that user.

:func:`server_for_tests` is what a test suite's fixture calls: an external server named by
``DSH_TEST_POSTGRES_DSN`` (a CI service container), else a temporary one, else a skip that
says how to install PostgreSQL — or, under ``CI=true``, a failure.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from types import TracebackType

__all__ = [
    "EXTERNAL_DSN_ENV",
    "INSTALL_HINT",
    "PostgresNotInstalledError",
    "TemporaryPostgres",
    "find_postgres_bindir",
    "main",
    "server_for_tests",
]

EXTERNAL_DSN_ENV = "DSH_TEST_POSTGRES_DSN"
INSTALL_HINT = (
    "PostgreSQL is not installed: `apt-get install postgresql` (its initdb and pg_ctl), or "
    f"point {EXTERNAL_DSN_ENV} at a server"
)
_USER = "dsh"  # the server's superuser, trusted on its private socket only


class PostgresNotInstalledError(RuntimeError):
    """No ``initdb``/``pg_ctl`` was found on this machine."""


def find_postgres_bindir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: on ``PATH``, else the newest
    ``/usr/lib/postgresql/<version>/bin``; ``None`` when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found is not None and shutil.which("pg_ctl") is not None:
        return Path(found).resolve().parent
    versions = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").is_file()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return versions[-1] if versions else None


def _free_port() -> int:
    # The server listens on its own socket folder only; the number just names the socket,
    # and a free TCP port keeps it from meeting another server's on this machine.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TemporaryPostgres:
    """A PostgreSQL server of its own, for as long as the ``with`` block (or until
    :meth:`stop`).

    Args:
        bindir: where ``initdb`` and ``pg_ctl`` are (default: :func:`find_postgres_bindir`).
        settings: extra server settings (``{"fsync": "off"}``: tests do not need the disk
            flushed; a benchmark leaves the defaults).

    Attributes:
        dsn: the libpq connection string of its ``postgres`` database.
        folder: where its data, socket and log live.

    Raises:
        PostgresNotInstalledError: no PostgreSQL on this machine.
        RuntimeError: ``initdb`` or ``pg_ctl`` failed (the message holds their output).
    """

    def __init__(self, bindir: Path | None = None, settings: dict[str, str] | None = None):
        found = bindir if bindir is not None else find_postgres_bindir()
        if found is None:
            raise PostgresNotInstalledError(INSTALL_HINT)
        self.bindir = found
        self.settings = dict(settings or {})
        self.folder = Path(tempfile.mkdtemp(prefix="dsh-pg-"))
        self.port = _free_port()
        self.dsn = f"host={self.folder / 'socket'} port={self.port} user={_USER} dbname=postgres"
        self._started = False

    def _as_server_user(self) -> list[str]:
        """The command prefix that runs a program as the server's user (none unless root)."""
        if os.geteuid() != 0:
            return []
        for name in ("postgres", "nobody"):
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                continue
            for path in (self.folder, *self.folder.rglob("*")):
                os.chown(path, entry.pw_uid, entry.pw_gid)
            runuser = shutil.which("runuser") or "/usr/sbin/runuser"
            return [runuser, "-u", name, "--"]
        raise RuntimeError("running as root and neither a postgres nor a nobody user exists")

    def _run(self, *argv: str) -> None:
        try:
            done = subprocess.run(
                [*self._as_server_user(), *argv],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                cwd=self.folder,
            )
        except FileNotFoundError:
            raise RuntimeError(f"{Path(argv[0]).name} failed: {argv[0]} does not exist") from None
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise RuntimeError(
                f"{Path(argv[0]).name} failed ({done.returncode}): {done.stdout}{done.stderr}{tail}"
            )

    def start(self) -> TemporaryPostgres:
        """``initdb`` and ``pg_ctl start``; returns when the server accepts connections."""
        (self.folder / "socket").mkdir()
        self.folder.chmod(0o755)  # the socket must be reachable by the test's user
        data = self.folder / "data"
        self._run(
            str(self.bindir / "initdb"),
            "-D", str(data),
            "-U", _USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )  # fmt: skip
        options = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.folder / 'socket'}'",
            "port": str(self.port),
            "max_connections": "200",
            **self.settings,
        }
        flags = " ".join(f"-c {key}={value}" for key, value in options.items())
        log = str(self.folder / "server.log")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(data), "-l", log, "-o", flags, "-w",
                  "start")  # fmt: skip
        self._started = True
        return self

    def stop(self) -> None:
        """Stop the server at once and remove its folder. Idempotent."""
        if self._started:
            self._started = False
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self._run(
                    str(self.bindir / "pg_ctl"), "-D", str(self.folder / "data"), "-m",
                    "immediate", "-w", "stop",
                )  # fmt: skip
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def server_for_tests() -> Generator[str]:
    """The DSN of a server for a test session: ``DSH_TEST_POSTGRES_DSN`` when set, else a
    :class:`TemporaryPostgres` for the block. Without PostgreSQL the calling test is skipped
    with :data:`INSTALL_HINT` — unless ``CI=true``, where it fails: CI must run these.
    """
    import pytest  # noqa: PLC0415 - test-only helper; the package itself never needs pytest

    external = os.environ.get(EXTERNAL_DSN_ENV, "").strip()
    if external:
        yield external
        return
    try:
        server = TemporaryPostgres(settings={"fsync": "off"})
    except PostgresNotInstalledError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {INSTALL_HINT}", pytrace=False)
        pytest.skip(INSTALL_HINT)
    with server:
        yield server.dsn


def main(argv: list[str]) -> int:
    """Run ``argv`` with ``DSH_POSTGRES_DSN`` naming a :class:`TemporaryPostgres`; its exit
    code (2 when there is no command, 3 when PostgreSQL is not installed)."""
    if not argv:
        print("usage: python -m dsh_persistence_postgres.testing COMMAND [ARG...]", file=sys.stderr)
        return 2
    try:
        server = TemporaryPostgres()
    except PostgresNotInstalledError as exc:
        print(f"dsh_persistence_postgres.testing: {exc}", file=sys.stderr)
        return 3
    with server:
        env = {**os.environ, "DSH_POSTGRES_DSN": server.dsn}
        return subprocess.run(argv, env=env, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

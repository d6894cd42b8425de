"""PostgreSQL store benchmark (issue #25): append and load throughput on one real server.

The same session (one synthetic turn per batch, every batch one commit) is appended by:

- ``dsh-postgres``: :class:`PostgresSessionStore` (psycopg 3; each batch one transaction on the
  writer's own connection, with its NOTIFY);
- ``agents-sqlalchemy``: OpenAI Agents' ``SQLAlchemySession.add_items`` on the *same server*
  (SQLAlchemy's asyncio engine over asyncpg, one transaction per call, the events as JSON
  objects, one row each) — the server-backed session store that SDK ships;
- ``dsh-sqlite``: :class:`SqliteSessionStore` on the local disk (WAL, ``synchronous=FULL``),
  for scale: what leaving the process for a server costs.

The sides append interleaved, batch by batch in rotating order, so the machine's load and the
disk's varying flush latency hit them alike; then each loads the whole session several times
(median). The server is a private one started with the installed PostgreSQL's defaults (fsync
and synchronous_commit on), on a Unix socket, or the one ``DSH_POSTGRES_DSN`` names.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg.conninfo

from dsh_core import CreateOptions, Event, Session
from dsh_core.testing import synthetic_turn
from dsh_persistence_postgres import PostgresSessionStore, PostgresSettings
from dsh_persistence_postgres.testing import TemporaryPostgres
from dsh_persistence_sqlite import SqliteSessionStore

LOADS = 5


@contextmanager
def _server() -> Generator[str]:
    """The DSN of the server to measure on."""
    given = os.environ.get("DSH_POSTGRES_DSN", "").strip()
    if given:
        yield given
        return
    with TemporaryPostgres() as server:  # the installed PostgreSQL's defaults: durable commits
        yield server.dsn


def _asyncpg_url(dsn: str) -> Any:
    """The same server as an SQLAlchemy asyncpg URL (a socket folder goes in the query)."""
    from sqlalchemy.engine import URL  # noqa: PLC0415 - bench group only

    params = psycopg.conninfo.conninfo_to_dict(dsn)
    host = str(params.get("host") or "localhost")
    port = int(str(params.get("port") or 5432))
    socket = host.startswith("/")
    return URL.create(
        "postgresql+asyncpg",
        username=str(params.get("user") or "") or None,
        password=str(params.get("password") or "") or None,
        host=None if socket else host,
        port=None if socket else port,
        database=str(params.get("dbname") or "postgres"),
        query={"host": host, "port": str(port)} if socket else {},
    )


class _DshSide:
    """A dsh store: ``add`` every event of a batch, then one ``flush`` (one commit)."""

    def __init__(self, name: str, store: PostgresSessionStore | SqliteSessionStore) -> None:
        self.name = name
        self._store = store
        self._session: Session = store.create(CreateOptions(f"bench-{uuid.uuid4().hex[:8]}"))

    def append(self, batch: list[Event]) -> None:
        for event in batch:
            self._session.add(event)
        self._session.flush()

    def load(self) -> int:
        return len(self._store.load(self._session.id).events)

    def close(self) -> None:
        self._session.close()
        self._store.close()


class _AgentsSide:
    """OpenAI Agents' ``SQLAlchemySession`` on the same server, events as JSON objects."""

    name = "agents-sqlalchemy"

    def __init__(self, dsn: str) -> None:
        from agents.extensions.memory.sqlalchemy_session import (  # noqa: PLC0415
            SQLAlchemySession,
        )
        from sqlalchemy.ext.asyncio import create_async_engine  # noqa: PLC0415

        self._loop = asyncio.new_event_loop()
        self._engine = create_async_engine(_asyncpg_url(dsn))
        self._session = SQLAlchemySession(
            f"bench-{uuid.uuid4().hex[:8]}", engine=self._engine, create_tables=True
        )

    def append(self, batch: list[Event]) -> None:
        items: list[Any] = [event.to_json() for event in batch]
        self._loop.run_until_complete(self._session.add_items(items))

    def load(self) -> int:
        return len(self._loop.run_until_complete(self._session.get_items()))

    def close(self) -> None:
        self._loop.run_until_complete(self._engine.dispose())
        self._loop.close()


@dataclass(slots=True)
class _Result:
    name: str
    append_s: float = 0.0
    loads: list[float] = field(default_factory=list[float])
    loaded: int = 0


def _plan(turns: int) -> list[list[Event]]:
    batches: list[list[Event]] = []
    next_seq = 0
    for turn in range(1, turns + 1):
        batch = synthetic_turn(next_seq, turn)
        batches.append(batch)
        next_seq += len(batch)
    return batches


def run(quick: bool) -> str:
    """Measure and return the Markdown section."""
    plan = _plan(40 if quick else 400)
    events = sum(map(len, plan))
    with _server() as dsn, tempfile.TemporaryDirectory(prefix="dsh-bench-pg-") as tmp:
        settings = PostgresSettings(dsn=dsn, schema_name=f"bench_{uuid.uuid4().hex[:8]}")
        pg_store = PostgresSessionStore(Path(tmp) / "sessions", settings)
        sides: list[Any] = [
            _DshSide("dsh-postgres", pg_store),
            _AgentsSide(dsn),
            _DshSide("dsh-sqlite", SqliteSessionStore(Path(tmp) / "sessions.sqlite3")),
        ]
        results = {side.name: _Result(side.name) for side in sides}
        try:
            for index, batch in enumerate(plan):
                turn = index % len(sides)
                for side in sides[turn:] + sides[:turn]:
                    started = time.perf_counter()
                    side.append(batch)
                    results[side.name].append_s += time.perf_counter() - started
            for _ in range(LOADS):
                for side in sides:
                    started = time.perf_counter()
                    results[side.name].loaded = side.load()
                    results[side.name].loads.append(time.perf_counter() - started)
        finally:
            for side in sides:
                side.close()
            PostgresSessionStore(Path(tmp) / "sessions", settings).discard()
    return _report(list(results.values()), events, len(plan))


def _report(results: list[_Result], events: int, batches: int) -> str:
    mine = results[0]
    lines = [
        "## PostgreSQL store beside SQLite and `SQLAlchemySession` (`bench/bench_postgres.py`)\n",
        f"One session of {events:,} events in {batches} batches (one synthetic turn each, one "
        "commit per batch), appended by each side interleaved batch by batch, then loaded "
        f"whole {LOADS} times (median). Server: "
        + (
            "a private PostgreSQL with its default durability (fsync, synchronous_commit on) "
            "on a Unix socket"
            if "DSH_POSTGRES_DSN" not in os.environ
            else "the one `DSH_POSTGRES_DSN` names"
        )
        + "; SQLite on the local disk.\n",
        "| side | append events/s | append ms/batch | load ms (median) | events loaded |"
        " append vs dsh-postgres | load vs dsh-postgres |",
        "|---|---|---|---|---|---|---|",
    ]
    for result in results:
        load = statistics.median(result.loads)
        lines.append(
            f"| {result.name} | {events / result.append_s:,.0f} | "
            f"{1000 * result.append_s / batches:.2f} | {1000 * load:.1f} | {result.loaded:,} | "
            f"{mine.append_s / result.append_s:.2f}x | "
            f"{statistics.median(mine.loads) / load:.2f}x |"
        )
    lines.append(
        "\nRatios above 1 mean faster than dsh-postgres. `SQLAlchemySession` stores each item "
        "as one JSON text row and reads them back with `get_items()` (JSON decoded, no "
        "validation); dsh-postgres validates every event and keeps the exact DSH lines."
    )
    return "\n".join(lines) + "\n"

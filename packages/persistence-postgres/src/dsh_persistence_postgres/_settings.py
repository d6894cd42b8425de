"""Where the server is: ``DSH_POSTGRES_*`` settings, else libpq's own ``PG*`` variables."""

from __future__ import annotations

import os
import re

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ENV_PREFIXES", "PostgresSettings", "describe_server"]

ENV_PREFIXES = ("DSH_POSTGRES_", "PG")
"""The variables that configure the store: ours, and the standard ones libpq reads (``PGHOST``,
``PGPORT``, ``PGUSER``, ``PGPASSWORD``, ``PGDATABASE``, ``PGPASSFILE``, ``PGSERVICE``…)."""

# A PostgreSQL identifier we create the store's tables in: quoted nowhere, so kept plain.
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class PostgresSettings(BaseSettings):
    """How to reach the database (each field is ``DSH_POSTGRES_<FIELD>``).

    Attributes:
        dsn: a libpq connection string or URI (``postgresql://user@host:5432/db``,
            ``host=/run/postgresql dbname=dsh``); empty means libpq's defaults and the
            standard ``PG*`` variables, exactly as ``psql`` would connect.
        schema_name: the PostgreSQL schema holding the store's tables (``DSH_POSTGRES_SCHEMA``);
            one schema holds any number of sessions roots, each in its own namespace.
        pool_max: connections the pool of one process keeps at most (writers hold their own:
            a session's writer lock lives as long as its connection).
        connect_timeout: seconds to wait for the server before a clear error.
        pool_timeout: seconds a store waits for a free pooled connection when every one is
            busy (many threads of one process at once) before a clear error.
    """

    model_config = SettingsConfigDict(env_prefix="DSH_POSTGRES_", extra="ignore", frozen=True)

    dsn: str = ""
    # DSH_POSTGRES_SCHEMA in the environment: "schema" itself is a pydantic model method
    schema_name: str = Field(
        default="dsh", validation_alias=AliasChoices("schema_name", "DSH_POSTGRES_SCHEMA")
    )
    pool_max: int = Field(default=8, ge=1)
    connect_timeout: float = Field(default=10.0, gt=0)
    pool_timeout: float = Field(default=30.0, gt=0)

    @field_validator("schema_name")
    @classmethod
    def _plain_identifier(cls, value: str) -> str:
        if not _SCHEMA_NAME.fullmatch(value):
            raise ValueError(
                "must be a plain lower-case PostgreSQL identifier (letters, digits, _; "
                f"at most 63), got {value!r}"
            )
        return value

    @field_validator("dsn")
    @classmethod
    def _parsable(cls, value: str) -> str:
        import psycopg.conninfo  # noqa: PLC0415 - psycopg (~50 ms) only when a DSN is given

        try:
            psycopg.conninfo.conninfo_to_dict(value)
        except psycopg.ProgrammingError as exc:
            # the parser's message quotes no part of the string, so no password leaks here
            raise ValueError(f"is not a libpq connection string: {exc}") from None
        return value


def describe_server(dsn: str) -> str:
    """The server as an error message names it: ``postgresql://user@host:port/db``, from the
    DSN and the ``PG*`` variables as libpq resolves them, never with the password."""
    import psycopg.conninfo  # noqa: PLC0415 - see _parsable

    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "postgresql://?"

    def pick(key: str, env: str, default: str) -> str:
        value = params.get(key) or os.environ.get(env) or default
        return str(value)

    host = pick("host", "PGHOST", "localhost")
    port = pick("port", "PGPORT", "5432")
    user = pick("user", "PGUSER", "")
    db = pick("dbname", "PGDATABASE", user or "?")
    who = f"{user}@" if user else ""
    return f"postgresql://{who}{host}:{port}/{db}"

"""Test databases: a migrated SQLite file per test, one migrated PostgreSQL database per run.

PostgreSQL comes from `EVENTLOG_TEST_POSTGRES_URL` (default: the local server, trust auth).
When it cannot be reached its tests skip, except under `CI=true` (or
`EVENTLOG_REQUIRE_POSTGRES=1`), where that is an error: CI must run both halves.
Tests share the run's one PostgreSQL database and empty it first (`empty_postgres`).
"""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.storage.schema import metadata
from tests.support.needs import missing, under_ci

DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
# The params of a module's fixture that serves both backends (`backend_database`); the
# PostgreSQL one is marked, so `-m "not postgresql"` leaves it out.
BACKEND_PARAMS = ("sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql))


def postgres_server_url() -> str:
    """The maintenance database URL of the PostgreSQL server used by the tests."""
    return os.environ.get("EVENTLOG_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def postgres_required() -> bool:
    """Whether a missing PostgreSQL fails the run instead of skipping its tests."""
    return under_ci() or os.environ.get("EVENTLOG_REQUIRE_POSTGRES") == "1"


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _admin(url: str, statement: str) -> None:
    conn = await asyncpg.connect(_asyncpg_dsn(url), timeout=5)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def create_postgres_database() -> str:
    """Create a fresh, empty database on the server; returns its SQLAlchemy URL."""
    server = postgres_server_url()
    name = f"eventlog_test_{os.getpid()}_{secrets.token_hex(4)}"
    asyncio.run(_admin(server, f'CREATE DATABASE "{name}"'))
    return make_url(server).set(database=name).render_as_string(hide_password=False)


def drop_postgres_database(url: str) -> None:
    """Drop a database made by `create_postgres_database` (closing its connections)."""
    name = make_url(url).database
    asyncio.run(_admin(postgres_server_url(), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def postgres_reachable() -> str | None:
    """None when the server answers; otherwise why not."""
    try:
        asyncio.run(_admin(postgres_server_url(), "SELECT 1"))
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        return f"{type(error).__name__}: {error}"
    return None


def require_postgres_database() -> str:
    """A fresh, empty database (`create_postgres_database`), once the server answers.

    With no server the caller's tests skip, or fail where PostgreSQL is required (CI).
    """
    problem = postgres_reachable()
    if problem is not None:
        missing(
            "a PostgreSQL server (EVENTLOG_TEST_POSTGRES_URL)",
            problem,
            required=postgres_required(),
        )
    return create_postgres_database()


async def empty_postgres(url: str) -> None:
    """Delete every row of every table of the schema (and restart the id sequences)."""
    tables = ", ".join(table.name for table in metadata.sorted_tables)
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY"))
    finally:
        await engine.dispose()


def backend_database(request: pytest.FixtureRequest, workdir: Path) -> str:
    """A database of the backend of `request.param` for a module's server process.

    `sqlite`: a new file in `workdir` (the service migrates it on start); `postgresql`: the
    run's migrated database (`postgres_database`), emptied.
    """
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{workdir / 'eventlog.db'}"
    url: str = request.getfixturevalue("postgres_database")
    asyncio.run(empty_postgres(url))
    return url

"""`mcp-eventlog migrate` on PostgreSQL takes an advisory lock: replicas that
each migrate as they start wait for one another instead of racing on the DDL."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.storage.migrate import MIGRATION_LOCK_KEY, head_revision
from tests.support.databases import create_postgres_database, drop_postgres_database
from tests.support.processes import REPO

pytestmark = [pytest.mark.postgresql, pytest.mark.process]


@pytest.fixture
def empty_database(postgres_database: str) -> Iterator[str]:
    """A PostgreSQL database with no schema at all (skips without a server, like the rest)."""
    url = create_postgres_database()
    try:
        yield url
    finally:
        drop_postgres_database(url)


def dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def migrate(url: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOG_")}
    env |= {"EVENTLOG_DATABASE_URL": url, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "app", "migrate"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


async def version(conn: asyncpg.Connection) -> str | None:
    exists = await conn.fetchval("SELECT to_regclass('alembic_version') IS NOT NULL")
    if not exists:
        return None
    rows = await conn.fetch("SELECT version_num FROM alembic_version")
    assert len(rows) == 1
    return str(rows[0]["version_num"])


async def test_migrate_waits_for_whoever_holds_the_migration_lock(empty_database: str) -> None:
    holder = await asyncpg.connect(dsn(empty_database))
    try:
        await holder.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
        process = migrate(empty_database)
        try:
            # Wait until the process is seen waiting on the lock (or, were it not to take
            # the lock, until it has migrated and exited).
            async with asyncio.timeout(60):
                while process.poll() is None:
                    waiting = await holder.fetchval(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                        "AND NOT granted AND pid <> pg_backend_pid()"
                    )
                    if waiting:
                        break
                    await asyncio.sleep(0.05)  # polling another process's state
            assert process.poll() is None, process.communicate()[0]
            assert await version(holder) is None  # nothing migrated while the lock is held
        finally:
            await holder.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
        output, _ = await asyncio.to_thread(process.communicate, timeout=120)
        assert process.returncode == 0, output
        assert "another process is migrating" in output
        assert await version(holder) == head_revision()
    finally:
        await holder.close()


async def test_two_migrate_runs_at_once_both_succeed(empty_database: str) -> None:
    runs = [migrate(empty_database), migrate(empty_database)]
    for run in runs:
        output, _ = await asyncio.to_thread(run.communicate, timeout=120)
        assert run.returncode == 0, output
    conn = await asyncpg.connect(dsn(empty_database))
    try:
        assert await version(conn) == head_revision()
        tables = await conn.fetchval(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename IN ('streams', 'generations', 'events', 'decisions')"
        )
        assert tables == 4
    finally:
        await conn.close()

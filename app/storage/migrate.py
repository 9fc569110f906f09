"""Running the alembic migrations from code (the CLI, the tests, `/readyz`).

On PostgreSQL an upgrade holds a session advisory lock for its whole run, so replicas that
all run `mcp-eventlog migrate` as they start are safe: one migrates, the others wait for
it and then find nothing left to do. (SQLite serialises writers on the file itself.)
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import column, inspect, select, table, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

_VERSION_TABLE = "alembic_version"
MIGRATIONS_PACKAGE = "app.migrations"
MIGRATION_LOCK_KEY = 0x6576_6C6F_676D_6967  # "evlogmig"


def migrations_dir() -> Path:
    """Where the migrations are: `EVENTLOG_MIGRATIONS_DIR`, else the installed package's own.

    The package `app.migrations` is the repository's top-level `migrations/` (mapped so in
    pyproject.toml): the same files in a checkout, an editable install or a wheel, found
    through the import system rather than the working directory.
    """
    override = os.environ.get("EVENTLOG_MIGRATIONS_DIR")
    if override:
        return Path(override)
    # A package on the file system (never a zip: alembic reads the scripts as files).
    return Path(str(resources.files(MIGRATIONS_PACKAGE)))


def alembic_config(database_url: str) -> Config:
    """An alembic config for this database that leaves the caller's logging alone."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    # `%` is alembic's interpolation character; URLs may contain it (encoded passwords).
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logging"] = False
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema to `revision` (blocking; run it outside an event loop or in a thread).

    On PostgreSQL, under the migration lock (see the module's docstring).
    """

    def run() -> None:
        command.upgrade(alembic_config(database_url), revision)

    if make_url(database_url).get_backend_name() == "postgresql":
        asyncio.run(_under_migration_lock(database_url, run))
    else:
        run()


async def _under_migration_lock(database_url: str, run: Callable[[], None]) -> None:
    # The lock is the session's, on a connection of its own kept for the whole run: if this
    # process dies, PostgreSQL ends the session and the lock with it.
    engine = create_async_engine(database_url, poolclass=NullPool)
    key = {"key": MIGRATION_LOCK_KEY}
    try:
        async with engine.connect() as conn:
            if not (await conn.execute(text("SELECT pg_try_advisory_lock(:key)"), key)).scalar():
                log.info("another process is migrating this database; waiting for it")
                await conn.execute(text("SELECT pg_advisory_lock(:key)"), key)
            await conn.commit()
            try:
                # alembic runs its own event loop: in a thread of its own, not in this one.
                await asyncio.to_thread(run)
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:key)"), key)
                await conn.commit()
    finally:
        await engine.dispose()


def head_revision() -> str | None:
    """The newest migration's revision."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return script.get_current_head()


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None before the first migration).

    Read from alembic's version table directly: `MigrationContext` would log two INFO lines
    per call, and `/readyz` calls this at every health check.
    """
    if not inspect(connection).has_table(_VERSION_TABLE):
        return None
    version: str | None = connection.execute(
        select(column("version_num")).select_from(table(_VERSION_TABLE))
    ).scalar_one_or_none()
    return version

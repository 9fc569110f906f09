"""Alembic environment: async, one code path for SQLite and PostgreSQL.

The URL is, in order: one a caller put on the config (`sqlalchemy.url`, as tests and the
CLI do), else `EVENTLOG_DATABASE_URL`, else the default SQLite file.
"""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from app.settings import Settings
from app.storage.database import Database
from app.storage.schema import metadata

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or Settings(keys=()).database_url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_online() -> None:
    # No keys: migrating needs none, and must work whatever EVENTLOG_KEYS holds.
    database = Database(Settings(database_url=_url(), keys=()))
    try:
        async with database.connect() as connection:
            await connection.run_sync(_configure)
            await connection.commit()
    finally:
        await database.close()


def run_migrations_offline() -> None:
    """Emit SQL to stdout instead of running it (`alembic upgrade head --sql`)."""
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=_url().startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    asyncio.run(_run_online())

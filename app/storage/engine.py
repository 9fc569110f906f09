"""The async engine, and the small hooks where SQLite and PostgreSQL differ.

One SQLAlchemy Core implementation serves both databases. What differs is how a
transaction takes its locks and its snapshot:

- writes: SQLite takes the database write lock up front (`BEGIN IMMEDIATE`), so two
  writers never both read a tail and then both append after it; PostgreSQL locks the rows
  it is about to change (`SELECT ... FOR UPDATE`, which SQLAlchemy renders as nothing on
  SQLite).
- reads that must be consistent (resume): SQLite in WAL mode gives a deferred
  transaction one snapshot; PostgreSQL needs REPEATABLE READ for the same guarantee.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from app.settings import Settings
from app.storage.errors import translated_errors

_SQLITE_BEGIN = "eventlog_sqlite_begin"


@dataclass(frozen=True, slots=True)
class Engines:
    """One pool, seen through three sets of execution options."""

    base: AsyncEngine
    write: AsyncEngine
    snapshot: AsyncEngine
    # SQLite only: the same file through the stdlib driver, for the group-commit writer's
    # own thread (app/storage/writer.py), where a whole group of appends runs without one
    # event-loop round trip per statement.
    sync_write: Engine | None = None

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read-only transaction on one snapshot, driver errors translated."""
        with translated_errors():
            async with self.snapshot.begin() as conn:
                yield conn

    async def dispose(self) -> None:
        """Close every pooled connection."""
        await self.base.dispose()
        if self.sync_write is not None:
            self.sync_write.dispose()


def create_engines(settings: Settings) -> Engines:
    """Build the engine for `settings.database_url` with its dialect's hooks."""
    if settings.is_sqlite:
        base = create_async_engine(settings.database_url, connect_args={"timeout": 30})
        _install_sqlite_hooks(base.sync_engine, settings)
        sync = create_engine(
            make_url(settings.database_url).set(drivername="sqlite"),
            connect_args={"timeout": 30, "check_same_thread": False},
        )
        _install_sqlite_hooks(sync, settings)
        return Engines(
            base=base,
            write=base.execution_options(**{_SQLITE_BEGIN: "IMMEDIATE"}),
            snapshot=base.execution_options(**{_SQLITE_BEGIN: "DEFERRED"}),
            sync_write=sync.execution_options(**{_SQLITE_BEGIN: "IMMEDIATE"}),
        )
    base = create_async_engine(
        settings.database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_pre_ping=True,  # a restarted PostgreSQL leaves dead pooled connections behind
    )
    return Engines(
        base=base,
        write=base,
        snapshot=base.execution_options(isolation_level="REPEATABLE READ"),
    )


def _install_sqlite_hooks(engine: Engine, settings: Settings) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let us, not the driver, say when a transaction begins (and how).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={settings.sqlite_synchronous}")
        cursor.execute(f"PRAGMA busy_timeout={int(settings.sqlite_busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(_SQLITE_BEGIN, "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")

"""Where SQLite and PostgreSQL differ, named once: each difference is a method of `Dialect`.

One SQLAlchemy Core implementation serves both databases. What differs:

- how the engines are built: SQLite gets its pragmas (WAL, `synchronous`, busy timeout,
  foreign keys) and a stdlib-driver twin for the writer thread; PostgreSQL a sized pool;
- how a consistent read is had: SQLite in WAL mode gives a deferred transaction one
  snapshot; PostgreSQL needs REPEATABLE READ for the same guarantee;
- how writes are run: SQLite has one write lock per database, so a process sends its writes
  through one group committer (`app/storage/transactions.py`); PostgreSQL locks rows, so
  each write is its own transaction and writers to different generations run in parallel;
- `INSERT … ON CONFLICT DO NOTHING`, which SQLAlchemy spells per dialect;
- a lock held for a whole pass across replicas: a PostgreSQL advisory lock; SQLite serves
  one machine and serialises every write anyway.

`SELECT … FOR UPDATE [SKIP LOCKED]` is not here: SQLAlchemy renders it as nothing on SQLite,
where the write transaction already holds the database lock.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import Column, Table, create_engine, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.sql.dml import Insert

from app.settings import Settings
from app.storage.errors import translated_errors
from app.storage.transactions import DirectTransactions, GroupCommit, Transactions
from app.storage.wakeups import (
    LocalCommits,
    PostgresNotifications,
    SqliteDataVersion,
    WakeupSource,
    notify,
)

_SQLITE_BEGIN = "eventlog_sqlite_begin"


@dataclass(frozen=True, slots=True)
class Engines:
    """The async engine (reads, migrations, the advisory lock) and its snapshot view."""

    base: AsyncEngine
    snapshot: AsyncEngine


class Dialect(ABC):
    """The hooks where the two databases differ; everything else is shared Core SQL."""

    name: str
    migrates_on_start: bool
    """Whether `serve` migrates the schema first unless told (one process owns a SQLite
    file; PostgreSQL replicas must not race to migrate, so there it is an explicit step)."""

    @abstractmethod
    def engines(self, settings: Settings) -> Engines:
        """Build the async engine for `settings.database_url` and its snapshot view."""

    @abstractmethod
    def transactions(
        self, settings: Settings, engines: Engines, local: LocalCommits
    ) -> Transactions:
        """How this process runs its write transactions (`local` is told after COMMIT)."""

    @abstractmethod
    def announce(self, conn: Connection, changed: Collection[int], *, origin: str) -> None:
        """Tell other processes, inside the transaction, which streams it changed."""

    @abstractmethod
    def wakeup_sources(self, settings: Settings, local: LocalCommits) -> list[WakeupSource]:
        """Where this process hears of other processes' changes (live readers)."""

    @abstractmethod
    def insert_ignore(self, table: Table, keys: Sequence[Column[Any]]) -> Insert:
        """`INSERT INTO table … ON CONFLICT (keys) DO NOTHING`."""

    @asynccontextmanager
    async def exclusive(self, engine: AsyncEngine, key: int) -> AsyncIterator[bool]:
        """Hold the lock `key` for a block; yields False when another process holds it."""
        yield True


class SqliteDialect(Dialect):
    """The embedded default: one file, WAL, one group committer per process."""

    name = "sqlite"
    migrates_on_start = True

    def engines(self, settings: Settings) -> Engines:
        base = create_async_engine(settings.database_url, connect_args={"timeout": 30})
        _install_sqlite_hooks(base.sync_engine, settings)
        return Engines(base=base, snapshot=base.execution_options(**{_SQLITE_BEGIN: "DEFERRED"}))

    def transactions(
        self, settings: Settings, engines: Engines, local: LocalCommits
    ) -> Transactions:
        # The writer thread uses the stdlib driver directly: a whole group of writes runs
        # there without one event-loop round trip per statement.
        sync = _stdlib_engine(settings).execution_options(**{_SQLITE_BEGIN: "IMMEDIATE"})
        return GroupCommit(sync, partial(self.announce, origin=local.origin), local.committed)

    def announce(self, conn: Connection, changed: Collection[int], *, origin: str) -> None:
        """Nothing to send: other processes on the file poll its `data_version`."""

    def wakeup_sources(self, settings: Settings, local: LocalCommits) -> list[WakeupSource]:
        return [SqliteDataVersion(_stdlib_engine(settings), interval=settings.live_poll_seconds)]

    def insert_ignore(self, table: Table, keys: Sequence[Column[Any]]) -> Insert:
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(keys))


class PostgresDialect(Dialect):
    """Many replicas on one database: row locks, REPEATABLE READ snapshots, advisory locks."""

    name = "postgresql"
    migrates_on_start = False

    def engines(self, settings: Settings) -> Engines:
        base = create_async_engine(
            settings.database_url,
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            # No ping at checkout (three round trips per transaction): a connection that
            # died while pooled fails its write before COMMIT, which is then run again on
            # a fresh one (`transactions.on_open_connection`), and so does a read.
            pool_pre_ping=False,
        )
        return Engines(
            base=base, snapshot=base.execution_options(isolation_level="REPEATABLE READ")
        )

    def transactions(
        self, settings: Settings, engines: Engines, local: LocalCommits
    ) -> Transactions:
        announce = partial(self.announce, origin=local.origin)
        return DirectTransactions(engines.base, announce, local.committed)

    def announce(self, conn: Connection, changed: Collection[int], *, origin: str) -> None:
        notify(conn, changed, origin=origin)

    def wakeup_sources(self, settings: Settings, local: LocalCommits) -> list[WakeupSource]:
        return [PostgresNotifications(settings.database_url, origin=local.origin)]

    def insert_ignore(self, table: Table, keys: Sequence[Column[Any]]) -> Insert:
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(keys))

    @asynccontextmanager
    async def exclusive(self, engine: AsyncEngine, key: int) -> AsyncIterator[bool]:
        # A session-level advisory lock on a connection kept for the block: released if
        # that connection dies, so a crashed replica never holds it for good.
        with translated_errors():
            async with engine.connect() as conn:
                query = text("SELECT pg_try_advisory_lock(:key)")
                locked = bool((await conn.execute(query, {"key": key})).scalar_one())
                # The lock is the session's; ending the transaction keeps it, and keeps this
                # connection from sitting "idle in transaction" for the whole block.
                await conn.commit()
                try:
                    yield locked
                finally:
                    if locked:
                        await conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                        await conn.commit()


_DIALECTS: dict[str, Dialect] = {d.name: d for d in (SqliteDialect(), PostgresDialect())}


def dialect_for(database_url: str) -> Dialect:
    """The hooks for a database URL (`sqlite+aiosqlite://…`, `postgresql+asyncpg://…`)."""
    name = make_url(database_url).get_backend_name()
    if name not in _DIALECTS:
        raise ValueError(f"unsupported database {name!r}: use SQLite or PostgreSQL")
    return _DIALECTS[name]


def dialect_of(conn: Connection) -> Dialect:
    """The hooks for the database a connection is on."""
    return _DIALECTS[conn.dialect.name]


def _stdlib_engine(settings: Settings) -> Engine:
    """The SQLite file through the stdlib driver, for a thread of its own."""
    engine = create_engine(
        make_url(settings.database_url).set(drivername="sqlite"),
        connect_args={"timeout": 30, "check_same_thread": False},
    )
    _install_sqlite_hooks(engine, settings)
    return engine


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

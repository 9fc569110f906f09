"""The database: its engines, how units of work run on it, and its dialect's hooks.

Every read and write of the service is a plain function over a synchronous `Connection`
(the queries in `generations`, `events`, `decisions`, `retention`), run here as one
transaction: `read` in one consistent snapshot, `write` through the process's write path
(see `app/storage/transactions.py`). Callers never begin or commit; driver errors leave as
`StorageUnavailable` / `StorageError`. What is one database's is its `Dialect`'s
(`app/storage/dialect.py`; `sqlite.py`, `postgres.py`), chosen here by the URL.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from sqlalchemy import false, update
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.settings import Settings
from app.storage.dialect import Dialect, Engines
from app.storage.errors import translated_errors
from app.storage.generations import KnownGenerations
from app.storage.migrate import current_revision
from app.storage.postgres import PostgresDialect
from app.storage.schema import streams
from app.storage.sqlite import SqliteDialect
from app.storage.transactions import T, Transactions, Work, on_open_connection
from app.storage.wakeups import LocalCommits, WakeupSource

DIALECTS: dict[str, Dialect] = {d.name: d for d in (SqliteDialect(), PostgresDialect())}
"""The databases the service runs on, by the backend name of their URLs."""


def dialect_for(database_url: str) -> Dialect:
    """The hooks for a database URL (`sqlite+aiosqlite://…`, `postgresql+asyncpg://…`;
    `Settings` gives every URL its driver, `app.settings.database_url_of`)."""
    name = make_url(database_url).get_backend_name()
    if name not in DIALECTS:
        raise ValueError(f"unsupported database {name!r}: use SQLite or PostgreSQL")
    return DIALECTS[name]


def location_problem(database_url: str) -> str | None:
    """Why the database cannot be opened, in one line naming the fix, when that shows
    before connecting (a SQLite file in a missing or unwritable folder); else None."""
    return dialect_for(database_url).location_problem(database_url)


class Database:
    """One database, opened from `settings.database_url` (SQLite file or PostgreSQL)."""

    def __init__(self, settings: Settings) -> None:
        self.dialect: Dialect = dialect_for(settings.database_url)
        self._settings = settings
        self._engines: Engines = self.dialect.engines(settings)
        self._local = LocalCommits()
        self._transactions: Transactions = self.dialect.transactions(
            settings, self._engines, self._local
        )
        # The generations this database has seen, for appends without a read: its own,
        # never shared with another `Database` of the process.
        self._known = KnownGenerations()
        for engine in self.sync_engines:  # every engine a unit of work runs on
            self.dialect.bind(engine)
            self._known.bind(engine)

    def wakeup_sources(self) -> list[WakeupSource]:
        """Where live readers hear of changes: this process's commits, then other processes'."""
        return [self._local, *self.dialect.wakeup_sources(self._settings, self._local)]

    @property
    def engine(self) -> AsyncEngine:
        """The async engine reads run on (for instrumentation: tests, tracing)."""
        return self._engines.base

    @property
    def sync_engines(self) -> tuple[Engine, ...]:
        """Every engine SQL runs on, as SQLAlchemy's sync `Engine` (for tracing): the async
        engine's, and on SQLite the writer thread's own."""
        own = self._transactions.own_engine
        base = self._engines.base.sync_engine
        return (base,) if own is None else (base, own)

    async def read(self, work: Work[T]) -> T:
        """Run `work` in a read-only transaction that sees one committed snapshot."""
        with translated_errors():
            return await on_open_connection(
                self._engines.snapshot, self._engines.checkouts, lambda c: c.run_sync(work)
            )

    async def write(self, work: Work[T], *, weight: int = 1) -> T:
        """Run `work` in a write transaction; returns once it is committed.

        `weight` (about the number of rows written) bounds how much one SQLite commit
        group carries. A refusal raised by `work` before it wrote anything
        (a `Rejected` of `app/errors.py`) fails only that write.
        """
        return await self._transactions.run(work, weight=weight)

    def exclusive(self, key: int) -> AbstractAsyncContextManager[bool]:
        """Hold the cross-replica lock `key` for a block (yields False if taken elsewhere)."""
        return self.dialect.exclusive(self._engines, key)

    async def revision(self) -> str | None:
        """The schema revision the database is at; `StorageUnavailable` if it does not answer."""
        with translated_errors():
            async with self._engines.checkouts.slot(), self._engines.base.connect() as conn:
                return await conn.run_sync(current_revision)

    async def check_writable(self) -> None:
        """Raise a `StorageError` unless a write can commit now (readiness asks).

        A write that changes nothing, through the same path as every write: a SQLite file
        that cannot be written, or a PostgreSQL in a read-only transaction mode, refuses it
        as it would refuse an append, and nothing is written when it passes.
        """
        await self.write(_no_op_write)

    def connect(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A plain connection, outside the service's transactions (migrations)."""
        return self._engines.base.connect()

    async def close(self) -> None:
        """Stop taking writes (queued ones are refused as unavailable), close the pools."""
        await self._transactions.close()
        await self._engines.base.dispose()


def _no_op_write(conn: Connection) -> None:
    """An UPDATE that matches no row: it needs the right to write, and writes nothing."""
    conn.execute(update(streams).where(false()).values(id=streams.c.id))

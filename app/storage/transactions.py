"""How a unit of work reaches the database: the interface every write path implements.

Every read and write is a plain function over a synchronous `Connection` (a *unit of
work*), so one implementation of it serves every way it is run. How a database runs its
writes is its own (`Dialect.transactions`): SQLite sends each process's writes through one
group committer (`app/storage/sqlite.py`), PostgreSQL runs each write as a transaction of
its own (`app/storage/postgres.py`). Both answer a caller only after COMMIT returned, and
both tell this process's `LocalCommits` what the transaction changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Protocol, TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.errors import StorageUnavailable
from app.storage.changes import Changes

T = TypeVar("T")
Work = Callable[[Connection], T]
"""A unit of work: runs inside a transaction it must not commit or roll back itself."""

Committed = Callable[[Changes], None]
"""Told, after COMMIT, which streams a transaction changed (this process's live readers)."""

log = logging.getLogger(__name__)


class Transactions(Protocol):
    """Runs a unit of work inside a write transaction and returns its result once committed."""

    @property
    def own_engine(self) -> Engine | None:
        """The engine of the runner's own thread, if it has one (for instrumentation)."""

    async def run(self, work: Work[T], *, weight: int = 1) -> T: ...

    async def close(self) -> None: ...


POOL_TIMEOUT_S = 30.0
"""How long a unit of work waits for a connection before it fails `database_unavailable`
(SQLAlchemy's pool default, which this replaces: see `Checkouts`)."""


class Checkouts:
    """The engine's pooled connections, handed out in the order they were asked for.

    SQLAlchemy's async pool is not fair: a connection checked in wakes the oldest waiter,
    but a caller arriving before that waiter runs takes it, and the waiter queues again at
    the back. Under load (a busy event loop, more callers than connections) some callers
    then wait the pool's whole timeout and fail `database_unavailable` while later ones
    pass, though no connection is held for long. Every checkout of the service's units of
    work takes a slot here first, as many slots as the pool has connections: waits are
    first come, first served, so a caller waits about (callers ahead of it) x (a transaction's time)
    / (connections), and the pool itself never makes anyone wait.
    """

    def __init__(self, capacity: int, *, timeout: float = POOL_TIMEOUT_S) -> None:
        self.capacity = capacity
        self._slots = asyncio.Semaphore(capacity)
        self._timeout = timeout

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the pool's connections' slots for the block (`StorageUnavailable`
        when none comes free within the timeout)."""
        if self._slots.locked():
            try:
                async with asyncio.timeout(self._timeout):
                    await self._slots.acquire()
            except TimeoutError:
                raise StorageUnavailable(
                    f"no database connection came free within {self._timeout:g} s "
                    f"(all {self.capacity} in use)"
                ) from None
        else:
            await self._slots.acquire()
        try:
            yield
        finally:
            self._slots.release()


async def on_open_connection(
    engine: AsyncEngine, checkouts: Checkouts, body: Callable[[AsyncConnection], Awaitable[T]]
) -> T:
    """`body` in a transaction on `engine` (a connection taken in turn from `checkouts`),
    run once more if its connection had closed.

    The pool does not ping a connection at checkout (three round trips per transaction).
    A connection that died while pooled (the database restarted) fails its first statement
    instead; nothing was written and COMMIT was never sent, so the transaction is run once
    more on a fresh connection (the pool replaces every connection older than that
    failure). A failure once COMMIT was sent is never retried: it may have committed.
    """
    for attempt in (1, 2):
        committing = False
        try:
            async with checkouts.slot(), engine.begin() as conn:
                result = await body(conn)
                committing = True
            return result
        except DBAPIError as error:
            if attempt == 2 or committing or not error.connection_invalidated:
                raise
            log.info("a pooled connection had closed; its transaction runs again")
    raise AssertionError("unreachable")  # pragma: no cover

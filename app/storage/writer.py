"""How write transactions reach the database: directly, or grouped (SQLite).

SQLite has one write lock per database. When every request opens its own
`BEGIN IMMEDIATE`, concurrent writers queue inside SQLite's busy handler, which sleeps
and retries (unfairly: an unlucky request can wait seconds), and every append pays its
own fsync. So on SQLite each process sends its writes through one `GroupCommitWriter`:
writes that arrive while a transaction is running are queued and run together in the
next one — one `BEGIN IMMEDIATE`, one COMMIT, one fsync for all of them — and each
caller is answered only after that COMMIT returned. Correctness still rests on the
database's lock (several processes on one file stay safe); the queue adds fairness and
throughput, not safety.

Writes come in two shapes. `run(work)` takes a coroutine over an `AsyncConnection`.
`run_sync(work)` takes a plain function over a `Connection`: the hot paths (append, open)
are written so, and on SQLite a group of them runs in the writer's own thread on the
stdlib driver — one event-loop round trip for the whole group instead of several per
statement through aiosqlite's thread. On PostgreSQL the same function runs through
`AsyncConnection.run_sync` (asyncpg), so there is still one implementation of each write.

PostgreSQL locks rows, so writes to different generations run in parallel: there every
write is its own transaction (`DirectWriter`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, Protocol, TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.storage.errors import (
    AppendRefusedError,
    NotFound,
    StorageUnavailable,
    translated_errors,
)

T = TypeVar("T")
Work = Callable[[AsyncConnection], Awaitable[T]]
SyncWork = Callable[[Connection], T]

log = logging.getLogger(__name__)

# A refusal is raised by a write's checks, before it has written anything, so the other
# writes of its group can still commit. Any other error fails the whole group.
_REFUSALS = (AppendRefusedError, NotFound)

MAX_GROUP_WRITES = 128
MAX_GROUP_WEIGHT = 10_000  # events: keeps one transaction (and the lock) short


class Writer(Protocol):
    """Runs a write inside a transaction and returns its result once committed."""

    async def run(self, work: Work[T], *, weight: int = 1) -> T: ...

    async def run_sync(self, work: SyncWork[T], *, weight: int = 1) -> T: ...

    async def close(self) -> None: ...


class DirectWriter:
    """Each write is its own transaction (PostgreSQL: row locks keep writers parallel)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def run(self, work: Work[T], *, weight: int = 1) -> T:
        """Run `work` in a transaction of its own."""
        with translated_errors():
            async with self._engine.begin() as conn:
                return await work(conn)

    async def run_sync(self, work: SyncWork[T], *, weight: int = 1) -> T:
        """Run the plain function `work` in a transaction of its own (via the async driver)."""
        with translated_errors():
            async with self._engine.begin() as conn:
                return await conn.run_sync(work)

    async def close(self) -> None:
        """Nothing to stop."""


@dataclass(slots=True)
class _Queued:
    work: Callable[[Any], Any]
    weight: int
    sync: bool
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


_Outcome = tuple[_Queued, Any, BaseException | None]


class GroupCommitWriter:
    """One transaction at a time per process; writes that wait meanwhile commit together."""

    def __init__(self, engine: AsyncEngine, sync_engine: Engine | None = None) -> None:
        self._engine = engine
        self._sync_engine = sync_engine
        self._thread: ThreadPoolExecutor | None = None
        self._queue: asyncio.Queue[_Queued] | None = None
        self._task: asyncio.Task[None] | None = None

    async def run(self, work: Work[T], *, weight: int = 1) -> T:
        """Queue `work`; its result (or refusal) arrives once its group has committed."""
        result: T = await self._enqueue(_Queued(work, weight, sync=False))
        return result

    async def run_sync(self, work: SyncWork[T], *, weight: int = 1) -> T:
        """Queue the plain function `work`; it runs in the writer's thread with its group."""
        if self._sync_engine is None:

            async def through_async(conn: AsyncConnection) -> T:
                return await conn.run_sync(work)

            return await self.run(through_async, weight=weight)
        result: T = await self._enqueue(_Queued(work, weight, sync=True))
        return result

    async def _enqueue(self, queued: _Queued) -> Any:
        self._ensure_running().put_nowait(queued)
        return await queued.future

    async def close(self) -> None:
        """Stop the committer; writes still queued are refused as unavailable."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._queue is not None and not self._queue.empty():
            _fail(self._queue.get_nowait(), StorageUnavailable("the service is stopping"))
        if self._thread is not None:
            # A group already in the thread finishes (or rolls back) before we return.
            await asyncio.to_thread(self._thread.shutdown, wait=True)
            self._thread = None

    def _ensure_running(self) -> asyncio.Queue[_Queued]:
        if self._queue is None:
            self._queue = asyncio.Queue()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._commit_forever(self._queue))
        return self._queue

    async def _commit_forever(self, queue: asyncio.Queue[_Queued]) -> None:
        while True:
            group = [await queue.get()]
            weight = group[0].weight
            while not queue.empty() and len(group) < MAX_GROUP_WRITES and weight < MAX_GROUP_WEIGHT:
                group.append(queue.get_nowait())
                weight += group[-1].weight
            # Consecutive writes of one shape share a transaction; the order is kept.
            for sync, run in groupby(group, key=lambda queued: queued.sync):
                await self._commit_run(list(run), sync=sync)

    async def _commit_run(self, run: list[_Queued], *, sync: bool) -> None:
        try:
            with translated_errors():
                outcomes = await (self._in_thread(run) if sync else self._in_loop(run))
        except asyncio.CancelledError:
            for queued in run:
                _fail(queued, StorageUnavailable("the service is stopping"))
            raise
        except Exception as error:  # the run failed as a whole; the loop goes on
            log.warning("a group of %d writes failed: %s", len(run), error)
            for queued in run:
                _fail(queued, error)
            return
        # Only now, after COMMIT returned, is anything acknowledged.
        for queued, value, refusal in outcomes:
            if queued.future.done():  # its caller went away; the write stands regardless
                continue
            if refusal is None:
                queued.future.set_result(value)
            else:
                queued.future.set_exception(refusal)

    async def _in_loop(self, run: list[_Queued]) -> list[_Outcome]:
        outcomes: list[_Outcome] = []
        async with self._engine.begin() as conn:
            for queued in run:
                try:
                    outcomes.append((queued, await queued.work(conn), None))
                except _REFUSALS as refused:
                    outcomes.append((queued, None, refused))
        return outcomes

    async def _in_thread(self, run: list[_Queued]) -> list[_Outcome]:
        if self._thread is None:
            # One thread: the stdlib driver's connection stays on the thread that uses it.
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="eventlog-writer")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._commit_in_thread, run)

    def _commit_in_thread(self, run: list[_Queued]) -> list[_Outcome]:
        assert self._sync_engine is not None
        outcomes: list[_Outcome] = []
        with self._sync_engine.begin() as conn:
            for queued in run:
                try:
                    outcomes.append((queued, queued.work(conn), None))
                except _REFUSALS as refused:
                    outcomes.append((queued, None, refused))
        return outcomes


def _fail(queued: _Queued, error: BaseException) -> None:
    if not queued.future.done():
        queued.future.set_exception(error)


def writer_for(engine: AsyncEngine, sync_engine: Engine | None = None) -> Writer:
    """The writer that suits the engine's database (`sync_engine`: SQLite's stdlib twin)."""
    if engine.dialect.name == "sqlite":
        return GroupCommitWriter(engine, sync_engine)
    return DirectWriter(engine)

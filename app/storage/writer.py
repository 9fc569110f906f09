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

PostgreSQL locks rows, so writes to different generations run in parallel: there every
write is its own transaction (`DirectWriter`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.storage.errors import (
    AppendRefusedError,
    NotFound,
    StorageUnavailable,
    translated_errors,
)

T = TypeVar("T")
Work = Callable[[AsyncConnection], Awaitable[T]]

log = logging.getLogger(__name__)

# A refusal is raised by a write's checks, before it has written anything, so the other
# writes of its group can still commit. Any other error fails the whole group.
_REFUSALS = (AppendRefusedError, NotFound)

MAX_GROUP_WRITES = 128
MAX_GROUP_WEIGHT = 10_000  # events: keeps one transaction (and the lock) short


class Writer(Protocol):
    """Runs `work` inside a write transaction and returns its result once committed."""

    async def run(self, work: Work[T], *, weight: int = 1) -> T: ...

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

    async def close(self) -> None:
        """Nothing to stop."""


@dataclass(slots=True)
class _Queued:
    work: Work[Any]
    weight: int
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class GroupCommitWriter:
    """One transaction at a time per process; writes that wait meanwhile commit together."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._queue: asyncio.Queue[_Queued] | None = None
        self._task: asyncio.Task[None] | None = None

    async def run(self, work: Work[T], *, weight: int = 1) -> T:
        """Queue `work`; its result (or refusal) arrives once its group has committed."""
        queued = _Queued(work, weight)
        self._ensure_running().put_nowait(queued)
        result: T = await queued.future
        return result

    async def close(self) -> None:
        """Stop the committer; writes still queued are refused as unavailable."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._queue is not None and not self._queue.empty():
            _fail(self._queue.get_nowait(), StorageUnavailable("the service is stopping"))

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
            try:
                await self._commit(group)
            except asyncio.CancelledError:
                for queued in group:
                    _fail(queued, StorageUnavailable("the service is stopping"))
                raise
            except Exception as error:  # the group failed as a whole; the loop goes on
                log.warning("a group of %d writes failed: %s", len(group), error)
                for queued in group:
                    _fail(queued, error)

    async def _commit(self, group: list[_Queued]) -> None:
        outcomes: list[tuple[_Queued, Any, BaseException | None]] = []
        with translated_errors():
            async with self._engine.begin() as conn:
                for queued in group:
                    try:
                        outcomes.append((queued, await queued.work(conn), None))
                    except _REFUSALS as refused:
                        outcomes.append((queued, None, refused))
        # Only now, after COMMIT returned, is anything acknowledged.
        for queued, value, error in outcomes:
            if queued.future.done():  # its caller went away; the write stands regardless
                continue
            if error is None:
                queued.future.set_result(value)
            else:
                queued.future.set_exception(error)


def _fail(queued: _Queued, error: BaseException) -> None:
    if not queued.future.done():
        queued.future.set_exception(error)


def writer_for(engine: AsyncEngine) -> Writer:
    """The writer that suits the engine's database."""
    if engine.dialect.name == "sqlite":
        return GroupCommitWriter(engine)
    return DirectWriter(engine)

"""How write transactions reach the database: one at a time per group (SQLite), or directly.

Every write is a plain function over a synchronous `Connection` (a *unit of work*), so one
implementation of it serves both ways it is run:

- SQLite has one write lock per database. When every request opens its own
  `BEGIN IMMEDIATE`, concurrent writers queue inside SQLite's busy handler, which sleeps and
  retries (unfairly: an unlucky request can wait seconds), and every append pays its own
  fsync. So each process sends its writes through one `GroupCommit`: writes that arrive
  while a transaction is running are queued and run together in the next one — one
  `BEGIN IMMEDIATE`, one COMMIT, one fsync for all of them — in the committer's own thread
  on the stdlib driver (one event-loop round trip per group, not several per statement).
  Each caller is answered only after that COMMIT returned. Correctness still rests on the
  database's lock (several processes on one file stay safe); the queue adds fairness and
  throughput, not safety.
- PostgreSQL locks rows, so writes to different generations run in parallel: there every
  write is its own transaction (`DirectTransactions`), run through `AsyncConnection.run_sync`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.storage.errors import AppendRefusedError, NotFound, StorageUnavailable, translated_errors
from app.storage.wakeups import Changes, take_touched

T = TypeVar("T")
Work = Callable[[Connection], T]
"""A unit of work: runs inside a transaction it must not commit or roll back itself."""

Announce = Callable[[Connection, Collection[int]], None]
"""Tells other processes, inside the transaction, which streams it changed."""
Committed = Callable[[Changes], None]
"""Told, after COMMIT, which streams a transaction changed (this process's live readers)."""

log = logging.getLogger(__name__)

# A refusal is raised by a write's checks, before it has written anything, so the other
# writes of its group can still commit. Any other error fails the whole group.
_REFUSALS = (AppendRefusedError, NotFound)

MAX_GROUP_WRITES = 128
MAX_GROUP_WEIGHT = 10_000  # events: keeps one transaction (and the lock) short


class Transactions(Protocol):
    """Runs a unit of work inside a write transaction and returns its result once committed."""

    @property
    def own_engine(self) -> Engine | None:
        """The engine of the runner's own thread, if it has one (for instrumentation)."""

    async def run(self, work: Work[T], *, weight: int = 1) -> T: ...

    async def close(self) -> None: ...


async def on_open_connection(
    engine: AsyncEngine, body: Callable[[AsyncConnection], Awaitable[T]]
) -> T:
    """`body` in a transaction on `engine`, run once more if its connection had closed.

    The pool does not ping a connection at checkout (three round trips per transaction).
    A connection that died while pooled (the database restarted) fails its first statement
    instead; nothing was written and COMMIT was never sent, so the transaction is run once
    more on a fresh connection (the pool replaces every connection older than that
    failure). A failure once COMMIT was sent is never retried: it may have committed.
    """
    for attempt in (1, 2):
        committing = False
        try:
            async with engine.begin() as conn:
                result = await body(conn)
                committing = True
            return result
        except DBAPIError as error:
            if attempt == 2 or committing or not error.connection_invalidated:
                raise
            log.info("a pooled connection had closed; its transaction runs again")
    raise AssertionError("unreachable")  # pragma: no cover


class DirectTransactions:
    """Each write is its own transaction (PostgreSQL: row locks keep writers parallel)."""

    def __init__(self, engine: AsyncEngine, announce: Announce, committed: Committed) -> None:
        self._engine = engine
        self._announce = announce
        self._committed = committed

    @property
    def own_engine(self) -> Engine | None:
        """None: writes run on the shared async engine."""
        return None

    async def run(self, work: Work[T], *, weight: int = 1) -> T:
        """Run `work` in a transaction of its own (through the async driver)."""
        with translated_errors():
            result, changed = await on_open_connection(
                self._engine, lambda conn: conn.run_sync(self._unit, work)
            )
        self._committed(changed)
        return result

    def _unit(self, conn: Connection, work: Work[T]) -> tuple[T, Changes]:
        try:
            result = work(conn)
        except BaseException:
            # Forget what it touched (the next transaction on this connection starts clean),
            # unless the connection died: asking it would raise over the error that says so.
            if not conn.invalidated:
                take_touched(conn)
            raise
        changed = take_touched(conn)
        if changed:
            self._announce(conn, changed)
        return result, changed

    async def close(self) -> None:
        """Nothing to stop (the engine's pool is disposed by its owner)."""


@dataclass(slots=True)
class _Queued:
    work: Work[Any]
    weight: int
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


_Outcome = tuple[_Queued, Any, BaseException | None]
_Group = tuple[list[_Outcome], Changes]


class GroupCommit:
    """One transaction at a time per process; writes that wait meanwhile commit together."""

    def __init__(self, engine: Engine, announce: Announce, committed: Committed) -> None:
        self._engine = engine
        self._announce = announce
        self._committed = committed
        self._thread: ThreadPoolExecutor | None = None
        self._queue: asyncio.Queue[_Queued] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def own_engine(self) -> Engine | None:
        """The stdlib-driver engine the committer's thread writes through."""
        return self._engine

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
        if self._thread is not None:
            # A group already in the thread finishes (or rolls back) before we return.
            await asyncio.to_thread(self._thread.shutdown, wait=True)
            self._thread = None
        self._engine.dispose()

    def _ensure_running(self) -> asyncio.Queue[_Queued]:
        if self._queue is None:
            self._queue = asyncio.Queue()
        if self._task is None or self._task.done():
            # A context of its own: started inside some request, the committer must not
            # carry that request's context (its request id in every later log line).
            self._task = asyncio.create_task(
                self._commit_forever(self._queue), context=contextvars.Context()
            )
        return self._queue

    async def _commit_forever(self, queue: asyncio.Queue[_Queued]) -> None:
        while True:
            group = [await queue.get()]
            weight = group[0].weight
            while not queue.empty() and len(group) < MAX_GROUP_WRITES and weight < MAX_GROUP_WEIGHT:
                group.append(queue.get_nowait())
                weight += group[-1].weight
            await self._commit(group)

    async def _commit(self, group: list[_Queued]) -> None:
        if self._thread is None:
            # One thread: the stdlib driver's connection stays on the thread that uses it.
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="eventlog-writer")
        loop = asyncio.get_running_loop()
        running = loop.run_in_executor(self._thread, self._commit_in_thread, group)
        try:
            await asyncio.shield(running)
        except asyncio.CancelledError:
            # Stopping. A group in the thread cannot be interrupted: wait for it, so that
            # every caller learns whether its write committed, and only then stop.
            await asyncio.wait([running])
            self._answer(group, running)
            raise
        except Exception as error:  # the group failed as a whole; the loop goes on
            log.warning("a group of %d writes failed: %s", len(group), error)
        self._answer(group, running)

    def _commit_in_thread(self, group: list[_Queued]) -> _Group:
        outcomes: list[_Outcome] = []
        with translated_errors(), self._engine.begin() as conn:
            try:
                for queued in group:
                    try:
                        outcomes.append((queued, queued.work(conn), None))
                    except _REFUSALS as refused:
                        outcomes.append((queued, None, refused))
            finally:
                changed = take_touched(conn)
            if changed:
                self._announce(conn, changed)
        return outcomes, changed

    def _answer(self, group: list[_Queued], running: asyncio.Future[_Group]) -> None:
        """Answer each caller of a finished group: only now, after COMMIT, is anything acked."""
        error = running.exception()
        if error is not None:
            for queued in group:
                _fail(queued, error)
            return
        outcomes, changed = running.result()
        self._committed(changed)
        _acknowledge(outcomes)


def _acknowledge(outcomes: list[_Outcome]) -> None:
    for queued, value, refusal in outcomes:
        if queued.future.done():  # its caller went away; the write stands regardless
            continue
        if refusal is None:
            queued.future.set_result(value)
        else:
            queued.future.set_exception(refusal)


def _fail(queued: _Queued, error: BaseException) -> None:
    if not queued.future.done():
        queued.future.set_exception(error)

"""SQLite's write path: one group committer per process (`GroupCommit`).

SQLite has one write lock per database. When every request opens its own `BEGIN IMMEDIATE`,
concurrent writers queue inside SQLite's busy handler, which sleeps and retries (unfairly:
an unlucky request can wait seconds), and every append pays its own fsync. So each process
sends its writes through one committer: writes that arrive while a transaction is running
are queued and run together in the next one — one `BEGIN IMMEDIATE`, one COMMIT, one fsync
for all of them — in the committer's own thread on the stdlib driver (one event-loop round
trip per group, not several per statement). Each caller is answered only after that COMMIT
returned. Correctness still rests on the database's lock (several processes on one file
stay safe); the queue adds fairness and throughput, not safety.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy.engine import Engine

from app.errors import Rejected, StorageUnavailable
from app.storage.changes import Changes, take_touched
from app.storage.errors import translated_errors
from app.storage.transactions import Committed, Work

T = TypeVar("T")

log = logging.getLogger(__name__)

MAX_GROUP_WRITES = 128
MAX_GROUP_WEIGHT = 10_000  # events: keeps one transaction (and the lock) short


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

    def __init__(self, engine: Engine, committed: Committed) -> None:
        self._engine = engine
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
                    except Rejected as refused:
                        # Raised by the write's checks before it wrote anything, so the other
                        # writes of its group still commit; any other error fails them all.
                        outcomes.append((queued, None, refused))
            finally:
                changed = take_touched(conn)
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

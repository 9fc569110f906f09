"""The service's background tasks, started and stopped together, each one supervised.

A task that dies of an unexpected error is logged and reported, marked down (readiness
fails while it is down) and restarted after a pause that grows with repeated failures.
Cancellation is the only way a task ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.domain.backoff import Backoff
from app.errors import StorageError
from app.service.clock import Clock, utc_now
from app.service.observer import Observer
from app.storage.database import Database

log = logging.getLogger(__name__)

FIRST_RESTART_DELAY_SECONDS = 1.0
MAX_RESTART_DELAY_SECONDS = 30.0
STOP_RETRY_SECONDS = 1.0


async def periodically(
    seconds: float, step: Callable[[], Awaitable[object]], *, logger: logging.Logger, failed: str
) -> None:
    """`step()` every `seconds`, for ever (a background task's body). A `StorageError` is
    logged as `failed` (with the error as its one argument) and the next period tries
    again; any other error ends the loop, for `Background` to report and restart."""
    while True:
        await asyncio.sleep(seconds)
        try:
            await step()
        except StorageError as error:
            logger.warning(failed, error)


SliceT = TypeVar("SliceT")


class PeriodicWorker(Generic[SliceT]):
    """What a periodic worker over the database holds: the database, its slice of the
    settings (its period and batch sizes among them), the observer it reports to and its
    clock."""

    def __init__(
        self,
        database: Database,
        settings: SliceT,
        *,
        observer: Observer | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self._database = database
        self._settings = settings
        self._observer = observer or Observer()
        self._clock = clock


@dataclass(frozen=True, slots=True)
class _Job:
    name: str
    run: Callable[[], Awaitable[None]]


class Background:
    """A set of named, long-running tasks under one task group."""

    def __init__(
        self,
        observer: Observer | None = None,
        *,
        first_delay: float = FIRST_RESTART_DELAY_SECONDS,
        max_delay: float = MAX_RESTART_DELAY_SECONDS,
    ) -> None:
        self._observer = observer or Observer()
        self._restarts = Backoff(first=first_delay, most=max_delay)
        self._jobs: list[_Job] = []
        self._down: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []

    def add(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        """Run `run()` in the background from `start()` on, restarting it if it dies."""
        self._jobs.append(_Job(name, run))

    @property
    def down(self) -> frozenset[str]:
        """The tasks that died and wait to be restarted."""
        return frozenset(self._down)

    def start(self) -> None:
        """Start every task (once)."""
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._supervise(job), name=job.name) for job in self._jobs
            ]

    async def stop(self) -> None:
        """Cancel every task and wait for them to end.

        A cancellation can be swallowed on its way through a database driver (SQLAlchemy
        turns a cancelled asyncpg call into a connection error, which a job's own error
        handling may then absorb), so a task is cancelled again until it has ended.
        """
        tasks, self._tasks = self._tasks, []
        while pending := [task for task in tasks if not task.done()]:
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=STOP_RETRY_SECONDS)
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _supervise(self, job: _Job) -> None:
        delays = self._restarts.pauses()
        while True:
            try:
                await job.run()
                raise RuntimeError("a background task returned")
            except Exception:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # Stopping while a task group inside the job failed: 3.11's TaskGroup may
                    # raise the failure instead of the cancellation. Stop all the same.
                    raise asyncio.CancelledError from None
                self._down.add(job.name)
                delay = next(delays)
                log.exception("background task %s died; restarting in %.1fs", job.name, delay)
                self._observer.background_failed(job.name)
            await asyncio.sleep(delay)
            self._down.discard(job.name)

"""The retention worker: what keeps the log bounded in time and in size.

One pass, in small batches (each its own short transaction):
1. generations whose TTL ran out since their last write become tombstones (`expired`);
2. generations older than their stream's newest `max_generations_per_stream` do too, so
   a stream retried forever keeps bounded events (its tokens still answer `reset`);
3. the events of those tombstones are deleted, chunk by chunk;
4. tombstones older than `tombstone_ttl_seconds` are deleted (from then on their tokens
   are `unknown_generation`), then streams left with no generation;
5. the decision audit log is trimmed to its count and age.

On PostgreSQL a pass holds an advisory lock, so several replicas never run it at once;
a replica that finds the lock taken skips its turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from app.service.clock import Clock, utc_now
from app.settings import Settings
from app.storage.decisions import DecisionStore
from app.storage.engine import create_engines
from app.storage.errors import StorageError
from app.storage.purge import Tombstoned
from app.storage.retention import RetentionStore
from app.storage.writer import writer_for

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What one pass did; `ran` is False when another replica held the lock."""

    ran: bool
    expired: int = 0
    capped: int = 0
    purged_events: int = 0
    deleted_tombstones: int = 0
    deleted_streams: int = 0
    trimmed_decisions: int = 0


class RetentionWorker:
    """Runs retention passes, once (`mcp-eventlog gc`) or every interval (`serve`)."""

    def __init__(
        self,
        store: RetentionStore,
        decisions: DecisionStore,
        settings: Settings,
        *,
        clock: Clock = utc_now,
        on_pass: Callable[[RetentionReport], None] = lambda _r: None,
    ) -> None:
        self._store = store
        self._decisions = decisions
        self._settings = settings
        self._clock = clock
        self._on_pass = on_pass
        self._task: asyncio.Task[None] | None = None

    async def run_once(self) -> RetentionReport:
        """One full pass (every batch until nothing is due), or a skip if locked elsewhere."""
        async with self._store.exclusive() as locked:
            report = await self._pass() if locked else RetentionReport(ran=False)
        self._on_pass(report)
        return report

    async def _pass(self) -> RetentionReport:
        s, now = self._settings, self._clock()
        batch = s.retention_batch_size
        expired = await self._drain_tombstoning(lambda: self._store.expire_due(now, batch))
        capped = await self._drain_tombstoning(
            lambda: self._store.cap_generations(s.max_generations_per_stream, now, batch)
        )
        cutoff = now - timedelta(seconds=s.tombstone_ttl_seconds)
        tombstones = await _drain(lambda: self._store.delete_tombstones(cutoff, batch))
        empty = await _drain(lambda: self._store.delete_empty_streams(cutoff, batch))
        trimmed = await _drain(
            lambda: self._decisions.trim(
                older_than=now - timedelta(seconds=s.decision_log_max_age_seconds),
                keep=s.decision_log_max_rows,
                limit=batch * 10,
            )
        )
        return RetentionReport(
            ran=True,
            expired=expired[0],
            capped=capped[0],
            purged_events=expired[1] + capped[1],
            deleted_tombstones=tombstones,
            deleted_streams=empty,
            trimmed_decisions=trimmed,
        )

    async def _drain_tombstoning(
        self, mark: Callable[[], Awaitable[list[Tombstoned]]]
    ) -> tuple[int, int]:
        generations = events = 0
        while marked := await mark():
            generations += len(marked)
            events += await self._store.delete_events(marked)
            await asyncio.sleep(0)  # let requests in between batches
        return generations, events

    def start(self) -> None:
        """Run a pass every `retention_interval_seconds` in the background (0: never)."""
        if self._settings.retention_interval_seconds > 0 and self._task is None:
            self._task = asyncio.create_task(self._run(), name="retention-worker")

    async def stop(self) -> None:
        """Stop the background passes (a pass in progress is cancelled between statements)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._settings.retention_interval_seconds)
            try:
                report = await self.run_once()
            except StorageError as error:
                log.warning("retention pass failed, retrying next interval: %s", error)
                continue
            if report.ran and (report.expired or report.capped or report.deleted_tombstones):
                log.info(
                    "retention: expired=%d capped=%d purged_events=%d tombstones_deleted=%d",
                    report.expired,
                    report.capped,
                    report.purged_events,
                    report.deleted_tombstones,
                )


async def _drain(step: Callable[[], Awaitable[int]]) -> int:
    total = 0
    while count := await step():
        total += count
        await asyncio.sleep(0)
    return total


async def collect_garbage(settings: Settings) -> RetentionReport:
    """One retention pass on `settings.database_url` (`mcp-eventlog gc`)."""
    engines = create_engines(settings)
    writer = writer_for(engines.write)
    try:
        worker = RetentionWorker(
            RetentionStore(engines, writer), DecisionStore(engines, writer), settings
        )
        return await worker.run_once()
    finally:
        await writer.close()
        await engines.dispose()

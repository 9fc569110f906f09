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
a replica that finds the lock taken skips its turn. An operator's purge of one stream
tombstones and deletes the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta
from functools import partial

from sqlalchemy.engine import Connection

from app.domain.ids import StreamKey
from app.domain.outcomes import RetentionPass
from app.service.background import PeriodicWorker, periodically
from app.settings.slices import Retention
from app.storage import decisions, events, retention
from app.storage.records import Tombstoned

log = logging.getLogger(__name__)

_PURGE_BATCH = 500


class RetentionWorker(PeriodicWorker[Retention]):
    """Runs retention passes, once (`mcp-eventlog gc`) or every interval (`serve`)."""

    async def run_once(self) -> RetentionPass:
        """One full pass (every batch until nothing is due), or a skip if locked elsewhere."""
        async with self._database.exclusive(retention.RETENTION_LOCK_KEY) as locked:
            report = await self._pass() if locked else RetentionPass(ran=False)
        self._observer.retention_ran(report)
        return report

    async def run(self) -> None:
        """A pass every `retention_interval_seconds`, for ever (a background task)."""
        await periodically(
            self._settings.interval_seconds,
            self._run_logged,
            logger=log,
            failed="retention pass failed, retrying next interval: %s",
        )

    async def _run_logged(self) -> None:
        """One pass, logged when it changed anything."""
        report = await self.run_once()
        if report.ran and (report.expired or report.capped or report.deleted_tombstones):
            log.info(
                "retention: expired=%d capped=%d purged_events=%d tombstones_deleted=%d",
                report.expired,
                report.capped,
                report.purged_events,
                report.deleted_tombstones,
            )

    async def purge_stream(self, key: StreamKey) -> tuple[int, int]:
        """Tombstone every generation of one stream and delete its events.

        Returns (generations tombstoned now, events deleted).
        """
        now = self._clock()

        def mark(conn: Connection) -> list[Tombstoned]:
            return retention.tombstone_stream(conn, key, now, _PURGE_BATCH)

        return await self._tombstone(mark, _PURGE_BATCH)

    async def _pass(self) -> RetentionPass:
        s, now = self._settings, self._clock()
        batch = s.batch_size

        def expire(conn: Connection) -> list[Tombstoned]:
            return retention.expire_due(conn, now, batch)

        def cap(conn: Connection) -> list[Tombstoned]:
            return retention.cap_generations(conn, s.max_generations_per_stream, now, batch)

        expired = await self._tombstone(expire, batch)
        capped = await self._tombstone(cap, batch)
        cutoff = now - timedelta(seconds=s.tombstone_ttl_seconds)
        oldest = now - timedelta(seconds=s.decision_log_max_age_seconds)
        return RetentionPass(
            ran=True,
            expired=expired[0],
            capped=capped[0],
            purged_events=expired[1] + capped[1],
            deleted_tombstones=await self._drain(
                lambda conn: retention.delete_tombstones(conn, cutoff, batch), batch
            ),
            deleted_streams=await self._drain(
                lambda conn: retention.delete_empty_streams(conn, cutoff, batch), batch
            ),
            trimmed_decisions=await self._drain(
                lambda conn: decisions.trim(
                    conn, older_than=oldest, keep=s.decision_log_max_rows, limit=batch * 10
                ),
                batch * 10,
            ),
        )

    async def _tombstone(
        self, mark: Callable[[Connection], list[Tombstoned]], weight: int
    ) -> tuple[int, int]:
        """Mark batches until none is left, deleting each batch's events; (marked, deleted)."""
        marked = deleted = 0
        while tombstones := await self._database.write(mark, weight=weight):
            marked += len(tombstones)
            for tomb in tombstones:
                deleted += await self._drain(
                    partial(events.delete_chunk, tomb=tomb), events.DELETE_CHUNK
                )
        return marked, deleted

    async def _drain(self, step: Callable[[Connection], int], weight: int) -> int:
        total = 0
        while count := await self._database.write(step, weight=weight):
            total += count
            await asyncio.sleep(0)  # let requests in between batches
        return total

"""The decision audit log: every resume decision, recorded off the resume path.

A resume only appends an entry to an in-memory buffer; a background task writes the
buffer in batches (one transaction per batch). So a resume never waits for a write, and
on SQLite never queues for the database lock behind appends. The price: entries still in
the buffer when a process dies uncleanly are lost (at most one flush interval's worth),
and when the database stays unreachable the buffer is bounded and the oldest entries are
dropped (counted). It is evidence for operators, not the history of record.

Every `invalid` verdict is also logged as a warning: it is a client bug or a spoof.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from sqlalchemy.engine import Connection

from app.domain.decision import Verdict
from app.domain.outcomes import Decided
from app.service.clock import Clock, utc_now
from app.service.observer import Observer
from app.storage import decisions
from app.storage.database import Database
from app.storage.decisions import MAX_LAST_EVENT_ID
from app.storage.errors import StorageError
from app.storage.records import DecisionEntry

log = logging.getLogger(__name__)

FLUSH_INTERVAL_SECONDS = 0.25
FLUSH_BATCH = 500
# About 40 s of a busy service's decisions, a few MB: enough to ride out a short outage.
BUFFER_LIMIT = 20_000
_LOGGED_CLAIM = 80


class DecisionAudit(Observer):
    """Buffers resume decisions and writes them to the `decisions` table in batches."""

    def __init__(
        self,
        database: Database,
        *,
        enabled: bool = True,
        buffer_limit: int = BUFFER_LIMIT,
        clock: Clock = utc_now,
        observer: Observer | None = None,
    ) -> None:
        self._database = database
        self.enabled = enabled
        self._buffer_limit = buffer_limit
        self._clock = clock
        self._observer = observer or Observer()
        self._buffer: deque[DecisionEntry] = deque()
        self._flushing = asyncio.Lock()

    def decided(self, decided: Decided) -> None:
        """Record one decision (a buffer append: no I/O on the resume path)."""
        if decided.verdict is Verdict.INVALID:
            # The claim is the client's own input: logged only as a repr, and cut short.
            log.warning(
                "invalid resume claim: reason=%s tenant=%s stream=%s last_event_id=%r",
                decided.reason.value,
                decided.tenant,
                decided.stream_id,
                decided.last_event_id[:_LOGGED_CLAIM],
            )
        if not self.enabled:
            return
        if len(self._buffer) >= self._buffer_limit:
            self._buffer.popleft()
            self._observer.audit_dropped(1)
        self._buffer.append(
            DecisionEntry(
                decided_at=self._clock(),
                tenant=decided.tenant,
                stream_id=decided.stream_id,
                # Cut here, not at insert: a buffered entry must not hold a 16 MB claim.
                last_event_id=decided.last_event_id[:MAX_LAST_EVENT_ID],
                verdict=decided.verdict.value,
                reason=decided.reason.value,
                generation=decided.generation,
                events=decided.delivered,
            )
        )

    async def flush(self) -> None:
        """Write everything buffered so far (the admin API calls it before reading)."""
        async with self._flushing:
            while self._buffer:
                batch = [self._buffer.popleft() for _ in range(min(FLUSH_BATCH, len(self._buffer)))]

                def record(conn: Connection, batch: list[DecisionEntry] = batch) -> None:
                    decisions.record(conn, batch)

                try:
                    await self._database.write(record, weight=len(batch))
                except StorageError:
                    # Put the batch back (oldest first) and let the next flush retry it.
                    self._buffer.extendleft(reversed(batch))
                    raise

    async def run(self) -> None:
        """Flush every `FLUSH_INTERVAL_SECONDS`, for ever (a background task)."""
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_SECONDS)
            try:
                await self.flush()
            except StorageError as error:
                log.warning("decision audit log not written yet: %s", error)

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
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from app.domain.append import Refusal
from app.domain.decision import Verdict
from app.service.clock import Clock, utc_now
from app.storage.decisions import MAX_LAST_EVENT_ID, DecisionEntry, DecisionStore
from app.storage.errors import StorageError
from app.storage.records import AppendResult

if TYPE_CHECKING:
    from app.service.eventlog import ResumeAnswer

log = logging.getLogger(__name__)

FLUSH_INTERVAL_SECONDS = 0.25
FLUSH_BATCH = 500
# About 40 s of a busy service's decisions, a few MB: enough to ride out a short outage.
BUFFER_LIMIT = 20_000
_LOGGED_CLAIM = 80


class DecisionAudit:
    """Buffers resume decisions and writes them to the `decisions` table in batches."""

    def __init__(
        self,
        store: DecisionStore,
        *,
        enabled: bool = True,
        buffer_limit: int = BUFFER_LIMIT,
        clock: Clock = utc_now,
        on_dropped: Callable[[int], None] = lambda _n: None,
    ) -> None:
        self._store = store
        self._enabled = enabled
        self._buffer_limit = buffer_limit
        self._clock = clock
        self._on_dropped = on_dropped
        self._buffer: deque[DecisionEntry] = deque()
        self._flushing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def decided(self, tenant: str, last_event_id: str, answer: ResumeAnswer) -> None:
        """Record one decision (a buffer append: no I/O on the resume path)."""
        decision = answer.decision
        if decision.verdict is Verdict.INVALID:
            # The claim is the client's own input: logged only as a repr, and cut short.
            log.warning(
                "invalid resume claim: reason=%s tenant=%s stream=%s last_event_id=%r",
                decision.reason.value,
                tenant,
                answer.stream_id,
                last_event_id[:_LOGGED_CLAIM],
            )
        if not self._enabled:
            return
        if len(self._buffer) >= self._buffer_limit:
            self._buffer.popleft()
            self._on_dropped(1)
        self._buffer.append(
            DecisionEntry(
                decided_at=self._clock(),
                tenant=tenant,
                stream_id=answer.stream_id,
                # Cut here, not at insert: a buffered entry must not hold a 16 MB claim.
                last_event_id=last_event_id[:MAX_LAST_EVENT_ID],
                verdict=decision.verdict.value,
                reason=decision.reason.value,
                generation=None if answer.generation is None else answer.generation.token,
                events=0 if answer.page is None else len(answer.page.events),
            )
        )

    def appended(self, result: AppendResult) -> None:
        """Appends are not audited."""

    def refused(self, refusal: Refusal) -> None:
        """Refused appends are not audited."""

    async def flush(self) -> None:
        """Write everything buffered so far (the admin API calls it before reading)."""
        async with self._flushing:
            while self._buffer:
                batch = [self._buffer.popleft() for _ in range(min(FLUSH_BATCH, len(self._buffer)))]
                try:
                    await self._store.record(batch)
                except StorageError:
                    # Put the batch back (oldest first) and let the next flush retry it.
                    self._buffer.extendleft(reversed(batch))
                    raise

    def start(self) -> None:
        """Start the background flusher."""
        if self._enabled and self._task is None:
            self._task = asyncio.create_task(self._run(), name="decision-audit-flusher")

    async def stop(self) -> None:
        """Stop the flusher and write what is left."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(StorageError):
            await self.flush()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_SECONDS)
            try:
                await self.flush()
            except StorageError as error:
                log.warning("decision audit log not written yet: %s", error)

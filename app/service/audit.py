"""The decision audit log: every resume decision, recorded off the resume path.

A resume only appends an entry to an in-memory buffer; a background task writes the
buffer in batches (one transaction per batch). So a resume never waits for a write, and
on SQLite never queues for the database lock behind appends. The price: entries still in
the buffer when a process dies uncleanly are lost (at most one flush interval's worth),
and when the database stays unreachable the buffer is bounded and the oldest entries are
dropped (counted). It is evidence for operators, not the history of record.

No entry can stop the log: a claim is made storable before it is buffered (NUL and lone
surrogates escaped), and an entry the database still refuses is dropped alone (logged,
counted) while the rest of its batch is written; only an unreachable database keeps
entries buffered for the next flush.

Every `invalid` verdict is also logged as a warning: it is a client bug or a spoof.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from functools import partial

from app.domain.decision import Verdict
from app.domain.outcomes import Decided
from app.errors import StorageUnavailable
from app.service.clock import Clock, utc_now
from app.service.observer import Observer
from app.storage import decisions
from app.storage.database import Database
from app.storage.decisions import MAX_LAST_EVENT_ID
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
            # The claim, its stream and tenant are the caller's: logged only as reprs (no
            # line breaks, no lone surrogates a UTF-8 log cannot write), and cut short.
            log.warning(
                "invalid resume claim: reason=%s tenant=%r stream=%r last_event_id=%r",
                decided.reason.value,
                decided.tenant[:_LOGGED_CLAIM],
                (decided.stream_id or "")[:_LOGGED_CLAIM],
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
                last_event_id=storable(decided.last_event_id[:MAX_LAST_EVENT_ID]),
                verdict=decided.verdict.value,
                reason=decided.reason.value,
                generation=decided.generation,
                events=decided.delivered,
            )
        )

    async def flush(self) -> None:
        """Write everything buffered so far (the admin API calls it before reading).

        Raises `StorageUnavailable` (the entries not written stay buffered, in order) when
        the database cannot be reached. An entry the database refuses for any other reason
        is dropped alone: logged, counted, and the rest of its batch written.
        """
        async with self._flushing:
            while self._buffer:
                batch = [self._buffer.popleft() for _ in range(min(FLUSH_BATCH, len(self._buffer)))]
                await self._write(batch)

    async def _write(self, batch: list[DecisionEntry]) -> None:
        # Parts still to write, the next one last; a refused part is split in two until
        # the entry at fault is alone (a few more writes, only when one is refused).
        parts = [batch]
        while parts:
            part = parts.pop()
            try:
                await self._database.write(
                    partial(decisions.record, entries=part), weight=len(part)
                )
            except (StorageUnavailable, asyncio.CancelledError):
                # Put back what is not written (oldest first) for the next flush to retry —
                # also when stopping: the last flush at shutdown writes it.
                # The parts in the order they would be written are (part, *reversed(parts));
                # each goes in front of the buffer, so the last of them goes first.
                for unwritten in (*parts, part):
                    self._buffer.extendleft(reversed(unwritten))
                raise
            except Exception as error:  # refused: not the database being away
                if len(part) == 1:
                    self._drop(part[0], error)
                else:
                    middle = len(part) // 2
                    parts += [part[middle:], part[:middle]]

    def _drop(self, entry: DecisionEntry, error: Exception) -> None:
        log.error(
            "decision audit entry dropped, the database refused it: %s "
            "(tenant=%r stream=%r last_event_id=%r)",
            _first_line(error),
            entry.tenant[:_LOGGED_CLAIM],
            (entry.stream_id or "")[:_LOGGED_CLAIM],
            entry.last_event_id[:_LOGGED_CLAIM],
        )
        self._observer.audit_dropped(1)

    async def run(self) -> None:
        """Flush every `FLUSH_INTERVAL_SECONDS`, for ever (a background task)."""
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_SECONDS)
            try:
                await self.flush()
            except StorageUnavailable as error:
                log.warning("decision audit log not written yet: %s", error)


def storable(claim: str) -> str:
    """A client's claim as text every database stores: NUL and lone surrogates escaped.

    A spoofed or broken `Last-Event-ID` is exactly what the audit log is for, so it is
    kept (as `\\x00`, `\\ud800`) rather than refused by PostgreSQL or the UTF-8 codec.
    """
    if "\x00" in claim:
        claim = claim.replace("\x00", "\\x00")
    try:
        claim.encode()
    except UnicodeEncodeError:
        claim = claim.encode("utf-8", "backslashreplace").decode()
    return claim


def _first_line(error: Exception) -> str:
    # Driver messages can carry statement parameters: the first line, cut short.
    text = str(error) or type(error).__name__
    return text.splitlines()[0][:200] if text.strip() else type(error).__name__

"""The writer's use cases: open, append, resume, page, and the stream view."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.engine import Connection

from app.domain.append import CONTROL_EVENT_TYPES, EventBody
from app.domain.ids import StreamKey
from app.domain.outcomes import BatchAcknowledged
from app.errors import (
    BatchTooLarge,
    ConflictingBatch,
    EventTooLarge,
    InvalidRequest,
    ReservedEventType,
    UnknownStream,
)
from app.service.clock import Clock, utc_now
from app.service.hub import Watch
from app.service.leases import Leases
from app.service.observer import Observer
from app.service.reading import Reading, ReadPath
from app.settings.slices import BodyLimits, LeaseSettings, StreamRules
from app.storage import events, generations
from app.storage.database import Database
from app.storage.generations import NewGeneration
from app.storage.records import (
    AppendResult,
    EventPage,
    GenerationRecord,
    StreamRecord,
)

MIN_LEASE_SECONDS, MAX_LEASE_SECONDS = 1, 86_400
"""The bounds of a generation's `lease_seconds` (the Open body's)."""
MAX_PIPELINE = 10_000
"""The most events a writer may declare it runs ahead of its acknowledgements."""


class CatchUp(Protocol):
    """Where a resume that waits for a tail hears of its stream's changes (the wake-up
    hub's watches: the wake-ups long-polls and live readers use)."""

    def watch(self, stream_pk: int) -> AbstractContextManager[Watch]: ...


@dataclass(frozen=True, slots=True)
class WriteLimits:
    """The settings the writer API reads: the stream rules (a generation's defaults and
    limits), the body limits (a batch's size, an event's), and the writer leases."""

    streams: StreamRules
    bodies: BodyLimits
    leases: LeaseSettings


class EventLogService:
    """The writer API's use cases, within one tenant at a time."""

    def __init__(
        self,
        database: Database,
        reads: ReadPath,
        limits: WriteLimits,
        observer: Observer,
        clock: Clock = utc_now,
        *,
        leases: Leases | None = None,
        catch_up: CatchUp | None = None,
    ) -> None:
        self._database = database
        self._reads = reads
        self._rules = limits.streams
        self._bodies = limits.bodies
        self._lease = limits.leases
        self._observer = observer
        self._clock = clock
        self.leases = leases or Leases(database, limits.leases, observer, clock)
        self._catch_up = catch_up

    async def open_generation(
        self,
        tenant: str,
        stream_id: str,
        *,
        reason: str | None = None,
        producer: str | None = None,
        max_events: int | None = None,
        ttl_seconds: int | None = None,
        lease_seconds: int | None = None,
        pipeline: int = 0,
    ) -> GenerationRecord:
        """Open a new current generation of the stream (creating it), fencing the old one;
        its writer holds a lease of `lease_seconds` (default `EVENTLOG_WRITER_LEASE_SECONDS`)
        and may run `pipeline` events ahead of its acknowledgements."""
        s = self._rules
        max_events = s.default_max_events if max_events is None else max_events
        ttl_seconds = s.default_ttl_seconds if ttl_seconds is None else ttl_seconds
        if lease_seconds is None:
            lease_seconds = self._lease.writer_lease_seconds
        if max_events > s.max_events_limit:
            raise InvalidRequest(f"max_events is over the limit ({s.max_events_limit})")
        if ttl_seconds > s.max_ttl_seconds:
            raise InvalidRequest(f"ttl_seconds is over the limit ({s.max_ttl_seconds})")
        if not MIN_LEASE_SECONDS <= lease_seconds <= MAX_LEASE_SECONDS:
            raise InvalidRequest(
                f"lease_seconds must be {MIN_LEASE_SECONDS}..{MAX_LEASE_SECONDS} seconds"
            )
        if not 0 <= pipeline <= MAX_PIPELINE:
            raise InvalidRequest(f"pipeline must be 0..{MAX_PIPELINE} events")
        request = NewGeneration(reason, producer, max_events, ttl_seconds, lease_seconds, pipeline)
        key, now = StreamKey(tenant, stream_id), self._clock()

        def open_in(conn: Connection) -> GenerationRecord:
            return generations.open_generation(conn, key, request, now)

        return await self._database.write(open_in)

    async def append(
        self,
        tenant: str,
        token: str,
        batch: Sequence[EventBody],
        *,
        first_seq: int | None,
        terminal: bool,
    ) -> AppendResult:
        """Append a batch atomically (see the contract for retries and refusals)."""
        self._check_limits(batch)
        now = self._clock()

        def append_in(conn: Connection) -> AppendResult:
            return events.append(
                conn, tenant, token, batch, first_seq=first_seq, terminal=terminal, now=now
            )

        try:
            result = await self._database.write(append_in, weight=max(1, len(batch)))
        except ConflictingBatch as conflicting:
            self._observer.refused(conflicting.conflict)
            await self.leases.refused(token, conflicting)
            raise
        self._observer.appended(BatchAcknowledged(result.count, result.duplicate, result.evicted))
        return result

    def _check_limits(self, batch: Sequence[EventBody]) -> None:
        s = self._bodies
        if len(batch) > s.max_batch_events:
            raise BatchTooLarge(f"{len(batch)} events; at most {s.max_batch_events} a batch")
        for index, body in enumerate(batch):
            if len(body.data.encode()) > s.max_event_bytes:
                raise EventTooLarge(f"events[{index}].data is over {s.max_event_bytes} bytes")
            if body.event in CONTROL_EVENT_TYPES:
                raise ReservedEventType(
                    f"events[{index}].event {body.event!r} is a control event of live reads "
                    f"(reserved: {', '.join(sorted(CONTROL_EVENT_TYPES))})"
                )

    async def resume(
        self,
        tenant: str,
        last_event_id: str,
        *,
        asked_stream: str | None,
        limit: int,
        max_bytes: int | None = None,
    ) -> Reading:
        """Decide a resume claim and read what the verdict delivers, in one snapshot (a
        live read asks for a smaller page, `max_bytes`)."""

        async def decided(waited: bool) -> Reading:
            return await self._reads.decide(
                last_event_id,
                tenant=tenant,
                asked_stream=asked_stream,
                limit=limit,
                max_bytes=max_bytes,
                waited=waited,
            )

        reading = await decided(False)
        if reading.decision.catch_up:
            reading = await self._caught_up(reading, decided)
        self._observer.decided(reading.outcome(tenant, last_event_id))
        return reading

    async def _caught_up(
        self, reading: Reading, decided: Callable[[bool], Awaitable[Reading]]
    ) -> Reading:
        """Row 4a: wait up to `EVENTLOG_RESUME_CATCHUP_MS` for the tail to reach the claim,
        deciding again on every change of the stream, until the decision no longer asks to
        wait (caught up, or fenced meanwhile: `lost_tail`) or the time is up."""
        claimed = reading.claimed
        wait = self._lease.resume_catchup_ms / 1000
        if self._catch_up is None or claimed is None or wait <= 0:
            return reading
        deadline = time.monotonic() + wait
        with self._catch_up.watch(claimed.stream_pk) as watch:
            while True:
                watch.arm()  # before reading: a change during the read rings it
                reading = await decided(True)
                remaining = deadline - time.monotonic()
                if not reading.decision.catch_up or remaining <= 0:
                    return reading
                await watch.wait(remaining)

    async def page(
        self, tenant: str, token: str, *, after: int, limit: int
    ) -> tuple[GenerationRecord, EventPage]:
        """A page of a generation's events after `after`; refused rather than skip any."""
        return await self._reads.page(token, tenant=tenant, after=after, limit=limit)

    async def stream(self, tenant: str, stream_id: str) -> StreamRecord:
        """The stream and its current generation, or `UnknownStream`."""
        key = StreamKey(tenant, stream_id)
        record = await self._database.read(lambda conn: generations.stream(conn, key))
        if record is None:
            raise UnknownStream(stream_id)
        return record

"""The writer's use cases: open, append, resume, page, and the stream view."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.domain.append import EventBody
from app.domain.decision import Decision, GenerationFacts, Reason, Verdict, decide
from app.domain.ids import parse_event_id
from app.domain.paging import PageRefusal, check_page
from app.service.clock import Clock, utc_now
from app.service.errors import InvalidRequest, LimitExceeded, PageRefused
from app.service.observer import EventLogObserver, Observers
from app.settings import Settings
from app.storage.errors import AppendRefusedError, UnknownStream
from app.storage.records import (
    AppendResult,
    EventPage,
    GenerationRecord,
    StreamRecord,
)
from app.storage.store import NewGeneration, SnapshotReader, Store

_PAGE_STATUS = {
    PageRefusal.BEYOND_TAIL: 409,
    PageRefusal.EXPIRED: 410,
    PageRefusal.EVICTED: 410,
}


@dataclass(frozen=True, slots=True)
class ResumeAnswer:
    """A decision and what it delivers: a generation and a page of its events, or nothing."""

    decision: Decision
    stream_id: str | None
    generation: GenerationRecord | None
    page: EventPage | None

    @property
    def next_after(self) -> int | None:
        """Where the next page starts, when the delivered generation has more events."""
        if self.generation is None or self.page is None:
            return None
        return self.page.next_after(self.generation.tail_seq)


class EventLogService:
    """The writer API's use cases, over one `Store`."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        clock: Clock = utc_now,
        observer: EventLogObserver | None = None,
    ) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._observer = observer or Observers()

    async def open_generation(
        self,
        tenant: str,
        stream_id: str,
        *,
        reason: str | None = None,
        producer: str | None = None,
        max_events: int | None = None,
        ttl_seconds: int | None = None,
    ) -> GenerationRecord:
        """Open a new current generation of the stream (creating it), fencing the old one."""
        s = self._settings
        max_events = s.default_max_events if max_events is None else max_events
        ttl_seconds = s.default_ttl_seconds if ttl_seconds is None else ttl_seconds
        if max_events > s.max_events_limit:
            raise InvalidRequest(
                "validation_error", f"max_events is over the limit ({s.max_events_limit})"
            )
        if ttl_seconds > s.max_ttl_seconds:
            raise InvalidRequest(
                "validation_error", f"ttl_seconds is over the limit ({s.max_ttl_seconds})"
            )
        request = NewGeneration(reason, producer, max_events, ttl_seconds)
        return await self._store.open_generation(tenant, stream_id, request, self._clock())

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
        try:
            result = await self._store.append(
                tenant, token, batch, first_seq=first_seq, terminal=terminal, now=self._clock()
            )
        except AppendRefusedError as refused:
            self._observer.refused(refused.refusal)
            raise
        self._observer.appended(result)
        return result

    def _check_limits(self, batch: Sequence[EventBody]) -> None:
        s = self._settings
        if len(batch) > s.max_batch_events:
            raise LimitExceeded(
                "batch_too_large", f"{len(batch)} events; at most {s.max_batch_events} a batch"
            )
        for index, body in enumerate(batch):
            if len(body.data.encode()) > s.max_event_bytes:
                raise LimitExceeded(
                    "event_too_large",
                    f"events[{index}].data is over {s.max_event_bytes} bytes",
                )

    async def resume(
        self, tenant: str, last_event_id: str, *, asked_stream: str | None, limit: int
    ) -> ResumeAnswer:
        """Decide a resume claim and read what the verdict delivers, in one snapshot."""
        answer = await self._resume(tenant, last_event_id, asked_stream=asked_stream, limit=limit)
        self._observer.decided(tenant, last_event_id, answer)
        return answer

    async def _resume(
        self, tenant: str, last_event_id: str, *, asked_stream: str | None, limit: int
    ) -> ResumeAnswer:
        claim = parse_event_id(last_event_id)
        async with self._store.snapshot() as snap:
            gen = None if claim is None else await snap.find_generation(tenant, claim.token)
            facts = None if gen is None else facts_of(gen)
            decision = self._decide(last_event_id, asked_stream, facts)
            stream_id = asked_stream or (gen.stream_id if gen else None)
            if decision.verdict is Verdict.RESUME:
                assert gen is not None
                assert claim is not None
                assert facts is not None
                page = await self._read(snap, gen, after=claim.seq, limit=limit)
                if page.contiguous:
                    return ResumeAnswer(decision, stream_id, gen, page)
                # The page disagrees with the generation's counters: a hole we must not skip.
                decision = self._decide(
                    last_event_id, asked_stream, replace(facts, contiguous=False)
                )
            elif decision.reason is Reason.SUPERSEDED:
                assert gen is not None
                fresh = await self._fresh_start(snap, gen, limit)
                if fresh is not None:
                    return ResumeAnswer(decision, stream_id, fresh[0], fresh[1])
            return ResumeAnswer(decision, stream_id, None, None)

    def _decide(
        self, last_event_id: str, asked_stream: str | None, facts: GenerationFacts | None
    ) -> Decision:
        return decide(
            last_event_id,
            asked_stream=asked_stream,
            generation=facts,
            policy=self._settings.terminal_resume,
        )

    async def _fresh_start(
        self, snap: SnapshotReader, superseded: GenerationRecord, limit: int
    ) -> tuple[GenerationRecord, EventPage] | None:
        """The stream's current generation from seq 1, when all of it is still there."""
        current = await snap.current_generation(superseded.stream_pk)
        if current is None or current.head_seq != 1 or current.expired or not current.contiguous:
            return None
        page = await self._read(snap, current, after=0, limit=limit)
        return (current, page) if page.contiguous else None

    async def page(
        self, tenant: str, token: str, *, after: int, limit: int
    ) -> tuple[GenerationRecord, EventPage]:
        """A page of a generation's events after `after`; 410 rather than skip any."""
        async with self._store.snapshot() as snap:
            gen = await snap.generation(tenant, token)
            refusal = check_page(
                after=after, head_seq=gen.head_seq, tail_seq=gen.tail_seq, expired=gen.expired
            )
            if refusal is not None:
                raise PageRefused(refusal.value, _PAGE_STATUS[refusal], _page_detail(refusal, gen))
            page = await self._read(snap, gen, after=after, limit=limit)
            if not page.contiguous:
                raise PageRefused("evicted", 410, "events in the requested range are missing")
            return gen, page

    async def _read(
        self, snap: SnapshotReader, gen: GenerationRecord, *, after: int, limit: int
    ) -> EventPage:
        return await snap.events(
            gen, after=after, limit=limit, max_bytes=self._settings.max_page_bytes
        )

    async def stream(self, tenant: str, stream_id: str) -> StreamRecord:
        """The stream and its current generation, or `UnknownStream`."""
        record = await self._store.stream(tenant, stream_id)
        if record is None:
            raise UnknownStream(stream_id)
        return record


def facts_of(gen: GenerationRecord, *, contiguous: bool | None = None) -> GenerationFacts:
    """What the decision needs to know of a stored generation (contiguity: its counters')."""
    return GenerationFacts(
        token=gen.token,
        stream_id=gen.stream_id,
        head_seq=gen.head_seq,
        tail_seq=gen.tail_seq,
        current=gen.current,
        terminal=gen.terminal,
        expired=gen.expired,
        contiguous=gen.contiguous if contiguous is None else contiguous,
    )


def _page_detail(refusal: PageRefusal, gen: GenerationRecord) -> str:
    if refusal is PageRefusal.BEYOND_TAIL:
        return f"after is beyond the tail ({gen.tail_seq})"
    if refusal is PageRefusal.EXPIRED:
        return "the generation's events were purged by its TTL"
    return f"events after that seq were evicted (head is {gen.head_seq})"

"""The one read path: decide a claim and read what the verdict delivers, in one snapshot.

Resume (writers), explain (operators) and paging (both) all read through here, so two
answers to one question cannot drift apart: explain's verdict is the verdict a resume
would get on the same state, because it is computed by the same code on the same page.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from sqlalchemy.engine import Connection

from app.domain.decision import Decision, GenerationFacts, Reason, TerminalPolicy, Verdict, decide
from app.domain.ids import EventId, parse_event_id
from app.domain.outcomes import Decided
from app.domain.paging import PageRefusal, check_page
from app.errors import PageOutOfRange
from app.service.clock import Clock, utc_now
from app.settings.slices import PageLimits, StreamRules
from app.storage import events, generations
from app.storage.database import Database
from app.storage.records import EventPage, GenerationRecord


@dataclass(frozen=True, slots=True)
class Reading:
    """A decision, the generation its id names, and what it delivers (or nothing)."""

    decision: Decision
    stream_id: str | None
    claimed: GenerationRecord | None
    delivered: GenerationRecord | None
    page: EventPage | None

    @property
    def after(self) -> int:
        """The seq the delivered events follow: the claim's when its own generation is
        resumed, 0 when another is delivered from its start (the page is read from there,
        and `delivered` and `page` are set together); 0 when nothing is delivered."""
        return 0 if self.page is None else self.page.after

    @property
    def next_after(self) -> int | None:
        """Where the next page starts, when the delivered generation has more events."""
        if self.delivered is None or self.page is None:
            return None
        return self.page.next_after(self.delivered.tail_seq)

    def outcome(self, tenant: str, last_event_id: str) -> Decided:
        """The decision as observers record it."""
        return Decided(
            tenant=tenant,
            stream_id=self.stream_id,
            last_event_id=last_event_id,
            verdict=self.decision.verdict,
            reason=self.decision.reason,
            generation=None if self.delivered is None else self.delivered.token,
            delivered=0 if self.page is None else len(self.page.events),
        )


@dataclass(frozen=True, slots=True)
class Step:
    """A live reader's generation now (None once even its tombstone is gone), the events
    after its position when they are due and retained, and its stream's current generation."""

    generation: GenerationRecord | None
    page: EventPage | None
    current: GenerationRecord | None


def facts_of(
    gen: GenerationRecord, *, contiguous: bool | None = None, now: datetime | None = None
) -> GenerationFacts:
    """What the decision needs to know of a stored generation (contiguity: its counters';
    with `now`, a lease that ran out by then is abandoned, recorded or not)."""
    facts = gen.facts()
    if contiguous is not None:
        facts = replace(facts, contiguous=contiguous)
    if now is not None and not facts.abandoned and gen.lapsed(now):
        facts = replace(facts, abandoned=True)
    return facts


@dataclass(frozen=True, slots=True)
class _When:
    """When a claim is decided: the clock's time (leases) and whether its caller waits."""

    now: datetime
    waited: bool


class DecisionTracer(Protocol):
    """Wraps a decision's read in a trace span (`app/telemetry/tracing.py`)."""

    def decision(self, reading: Awaitable[Reading]) -> Awaitable[Reading]: ...


class ReadPath:
    """Decide-and-read and page reads, each one snapshot of the database."""

    def __init__(
        self,
        database: Database,
        rules: StreamRules,
        pages: PageLimits,
        tracer: DecisionTracer | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self._database = database
        self._clock = clock
        self._tracer = tracer  # None (not tracing): not one call more per decision
        self._policy: TerminalPolicy = rules.terminal_resume
        self._max_bytes = pages.max_bytes

    async def decide(
        self,
        last_event_id: str,
        *,
        tenant: str | None,
        asked_stream: str | None,
        limit: int,
        max_bytes: int | None = None,
        waited: bool = False,
    ) -> Reading:
        """The verdict on a claim and the page it delivers (of at most `max_bytes` of data,
        default `EVENTLOG_MAX_PAGE_BYTES`).

        `tenant` None looks the token up across every tenant (an operator's explain);
        `asked_stream` None takes the stream from the token (`/v1/resume`); `waited`: the
        caller is waiting for the tail to reach the claim (row 4a, `decide`).
        """
        now = self._clock()

        def read(conn: Connection) -> Reading:
            size = max_bytes or self._max_bytes
            return self._decide_in(
                conn, last_event_id, tenant, asked_stream, limit, size, _When(now, waited)
            )

        reading = self._database.read(read)
        return await (reading if self._tracer is None else self._tracer.decision(reading))

    async def page(
        self, token: str, *, tenant: str | None, after: int, limit: int
    ) -> tuple[GenerationRecord, EventPage]:
        """A page of a generation's events after `after`; refused rather than skip any."""

        def read(conn: Connection) -> tuple[GenerationRecord, EventPage]:
            gen = generations.get(conn, token, tenant=tenant)
            refusal = check_page(
                after=after, head_seq=gen.head_seq, tail_seq=gen.tail_seq, expired=gen.expired
            )
            if refusal is not None:
                raise PageOutOfRange(refusal, _page_detail(refusal, gen, after))
            page = self._read(conn, gen, after, limit)
            if not page.contiguous:
                raise PageOutOfRange(
                    PageRefusal.EVICTED, "events in the requested range are missing"
                )
            return gen, page

        return await self._database.read(read)

    async def step(
        self, token: str, *, tenant: str, after: int, limit: int, max_bytes: int | None = None
    ) -> Step:
        """Where a live reader at `<token>:<after>` stands now, in one snapshot (a page of
        at most `max_bytes` of data, default `EVENTLOG_MAX_PAGE_BYTES`)."""
        size = max_bytes or self._max_bytes

        def read(conn: Connection) -> Step:
            gen = generations.find(conn, token, tenant=tenant)
            if gen is None:  # its tombstone outlived the tombstone TTL: as good as expired
                return Step(None, None, None)
            current = generations.current_of(conn, [gen.stream_pk]).get(gen.stream_pk)
            due = not gen.expired and gen.head_seq - 1 <= after < gen.tail_seq
            page = self._read(conn, gen, after, limit, size) if due else None
            return Step(gen, page, current)

        return await self._database.read(read)

    async def current(self, stream_pk: int) -> GenerationRecord | None:
        """The stream's current generation (None: the stream has none, or is gone)."""

        def read(conn: Connection) -> GenerationRecord | None:
            return generations.current_of(conn, [stream_pk]).get(stream_pk)

        return await self._database.read(read)

    def _decide_in(
        self,
        conn: Connection,
        last_event_id: str,
        tenant: str | None,
        asked_stream: str | None,
        limit: int,
        max_bytes: int,
        when: _When,
    ) -> Reading:
        claim = parse_event_id(last_event_id)  # the one parse of the claim
        gen = None if claim is None else generations.find(conn, claim.token, tenant=tenant)
        # What a resume would deliver is read before deciding, so that a hole the counters
        # cannot see (row 9) is known to the one decision of this read.
        page = (
            None
            if claim is None or gen is None
            else self._deliverable(conn, gen, claim, limit, max_bytes)
        )
        hole = page is not None and not page.contiguous
        facts = (
            None
            if gen is None
            else facts_of(gen, contiguous=gen.contiguous and not hole, now=when.now)
        )
        decision = decide(
            claim,
            asked_stream=asked_stream,
            generation=facts,
            policy=self._policy,
            waited=when.waited,
        )
        stream_id = asked_stream or (None if gen is None else gen.stream_id)
        if decision.verdict is Verdict.RESUME:
            assert page is not None, "a resumable claim's page is read before deciding"
            return Reading(decision, stream_id, gen, gen, page)
        if decision.reason is Reason.SUPERSEDED:
            assert gen is not None
            fresh = self._fresh_start(conn, gen, limit, max_bytes)
            if fresh is not None:
                return Reading(decision, stream_id, gen, *fresh)
        return Reading(decision, stream_id, gen, None, None)

    def _deliverable(
        self, conn: Connection, gen: GenerationRecord, claim: EventId, limit: int, max_bytes: int
    ) -> EventPage | None:
        """The page after the claim when a resume could deliver it: the generation is
        current, not purged and without a hole by its counters, and the claimed seq lies in
        its retained run. Every claim the table resumes is one of these (rows 4 to 5, 7, 8
        and 9 answer the others), so a resume always has its page, and no other claim is read
        for a page it cannot get."""
        in_run = gen.head_seq - 1 <= claim.seq <= gen.tail_seq
        if gen.current and not gen.expired and gen.contiguous and in_run:
            return self._read(conn, gen, claim.seq, limit, max_bytes)
        return None

    def _fresh_start(
        self, conn: Connection, superseded: GenerationRecord, limit: int, max_bytes: int
    ) -> tuple[GenerationRecord, EventPage] | None:
        """The stream's current generation from seq 1, when all of it is still there."""
        current = generations.current_of(conn, [superseded.stream_pk]).get(superseded.stream_pk)
        if current is None or not current.fully_retained:
            return None
        page = self._read(conn, current, 0, limit, max_bytes)
        return (current, page) if page.contiguous else None

    def _read(
        self,
        conn: Connection,
        gen: GenerationRecord,
        after: int,
        limit: int,
        max_bytes: int | None = None,
    ) -> EventPage:
        size = self._max_bytes if max_bytes is None else max_bytes
        return events.read_page(conn, gen, after=after, limit=limit, max_bytes=size)


def _page_detail(refusal: PageRefusal, gen: GenerationRecord, after: int) -> str:
    if refusal is PageRefusal.BEYOND_TAIL:
        return f"after {after} is beyond the tail ({gen.tail_seq})"
    if refusal is PageRefusal.EXPIRED:
        return "the generation's events were purged by its TTL"
    return f"events after {after} were evicted (head is {gen.head_seq})"

"""The operator's use cases: look inside every tenant's streams, explain a decision, act.

`explain` runs the same `decide()` the resume path runs, on the same facts, and returns
every row of the table it evaluated; it delivers nothing and records nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.domain.decision import Decision, GenerationFacts, Reason, Verdict, decide
from app.domain.ids import parse_event_id
from app.domain.paging import check_page
from app.service.audit import DecisionAudit
from app.service.clock import Clock, utc_now
from app.service.errors import PageRefused, ServiceRefusal
from app.service.eventlog import facts_of
from app.settings import Settings
from app.storage.decisions import DecisionEntry, DecisionFilter, DecisionStore
from app.storage.errors import UnknownGeneration, UnknownStream
from app.storage.inspect import Inspector, StreamKey, StreamSummary, Totals
from app.storage.records import EventPage, GenerationRecord
from app.storage.store import Store


class AmbiguousStream(ServiceRefusal):
    """A stream id that several tenants use, asked about without saying which tenant."""

    status = 409
    code = "ambiguous_stream"


@dataclass(frozen=True, slots=True)
class StreamDetail:
    """A stream with every generation it still has, in epoch order."""

    key: StreamKey
    created_at: datetime
    updated_at: datetime
    generations: list[GenerationRecord]


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a resume would deliver: events of `generation` after `after` (`count` of them)."""

    generation: str
    after: int
    count: int


@dataclass(frozen=True, slots=True)
class Explanation:
    """A dry-run decision: the verdict, every row checked, and what would be delivered."""

    decision: Decision
    generation: GenerationRecord | None
    facts: GenerationFacts | None
    delivery: Delivery | None


@dataclass(frozen=True, slots=True)
class Stats:
    """Totals across the log and the verdicts in the audit log, by (verdict, reason)."""

    totals: Totals
    verdicts: dict[tuple[str, str], int]


class AdminService:
    """Cross-tenant reads, explain, force-terminate, purge, the audit log and stats."""

    def __init__(
        self,
        store: Store,
        inspector: Inspector,
        decisions: DecisionStore,
        audit: DecisionAudit,
        settings: Settings,
        clock: Clock = utc_now,
    ) -> None:
        self._store = store
        self._inspector = inspector
        self._decisions = decisions
        self._audit = audit
        self._settings = settings
        self._clock = clock

    async def streams(
        self, *, prefix: str, tenant: str | None, after: StreamKey | None, limit: int
    ) -> list[StreamSummary]:
        """A page of streams (every tenant's unless `tenant` is given)."""
        return await self._inspector.streams(prefix=prefix, tenant=tenant, after=after, limit=limit)

    async def stream(self, stream_id: str, tenant: str | None) -> StreamDetail:
        """A stream and all its generations; `tenant` is needed only when the id repeats."""
        key = await self._resolve(stream_id, tenant)
        record = await self._store.stream(key.tenant, key.stream_id)
        if record is None:  # deleted by retention since `_resolve` saw it
            raise UnknownStream(stream_id)
        generations = await self._inspector.generations_of(key)
        return StreamDetail(key, record.created_at, record.updated_at, generations)

    async def _resolve(self, stream_id: str, tenant: str | None) -> StreamKey:
        tenants = await self._inspector.tenants_of(stream_id)
        if tenant is not None:
            if tenant not in tenants:
                raise UnknownStream(stream_id)
            return StreamKey(tenant, stream_id)
        if not tenants:
            raise UnknownStream(stream_id)
        if len(tenants) > 1:
            raise AmbiguousStream(
                f"tenants {', '.join(tenants)} each have a stream {stream_id!r}; pass ?tenant="
            )
        return StreamKey(tenants[0], stream_id)

    async def generation(self, token: str) -> GenerationRecord:
        """One generation by token, whatever its tenant."""
        return await self._inspector.generation(token)

    async def page(
        self, token: str, *, after: int, limit: int
    ) -> tuple[GenerationRecord, EventPage]:
        """A page of a generation's events; refused (never skipped) as for writers."""
        owner = (await self._inspector.generation(token)).tenant
        async with self._store.snapshot() as snap:
            gen = await snap.generation(owner, token)
            refusal = check_page(
                after=after, head_seq=gen.head_seq, tail_seq=gen.tail_seq, expired=gen.expired
            )
            if refusal is not None:
                status = 409 if refusal.value == "beyond_tail" else 410
                raise PageRefused(refusal.value, status, f"cannot page after {after}")
            page = await snap.events(
                gen, after=after, limit=limit, max_bytes=self._settings.max_page_bytes
            )
        if not page.contiguous:
            raise PageRefused("evicted", 410, "events in the requested range are missing")
        return gen, page

    async def terminate(self, token: str) -> GenerationRecord:
        """Force a stuck generation terminal at its tail (idempotent)."""
        return await self._inspector.terminate(token, self._clock())

    async def purge(self, stream_id: str, tenant: str | None) -> tuple[StreamKey, int, int]:
        """Purge a stream's events; its generations stay as tombstones (`expired`)."""
        key = await self._resolve(stream_id, tenant)
        generations, events = await self._inspector.purge(key, self._clock())
        return key, generations, events

    async def explain(
        self, last_event_id: str, *, stream_id: str | None, tenant: str | None
    ) -> Explanation:
        """The decision on a claim as a dry run, with every row of the table it checked.

        With `tenant` the token is looked up as that tenant's writer would see it; without,
        across every tenant.
        """
        claim = parse_event_id(last_event_id)
        gen = None if claim is None else await self._find(claim.token, tenant)
        facts = None
        if gen is not None and claim is not None:
            facts = await self._facts(gen, claim.seq)
        decision = decide(
            last_event_id,
            asked_stream=stream_id,
            generation=facts,
            policy=self._settings.terminal_resume,
        )
        return Explanation(decision, gen, facts, await self._delivery(decision, gen))

    async def _find(self, token: str, tenant: str | None) -> GenerationRecord | None:
        if tenant is not None:
            async with self._store.snapshot() as snap:
                return await snap.find_generation(tenant, token)
        try:
            return await self._inspector.generation(token)
        except UnknownGeneration:
            return None

    async def _facts(self, gen: GenerationRecord, seq: int) -> GenerationFacts:
        contiguous = gen.contiguous
        if contiguous and seq <= gen.tail_seq and not gen.expired:
            # Count what is really stored after the claim, as the resume's page read would.
            expected = gen.tail_seq - max(seq, gen.head_seq - 1)
            stored = await self._inspector.events_after(gen, max(seq, gen.head_seq - 1))
            contiguous = stored == expected
        return facts_of(gen, contiguous=contiguous)

    async def _delivery(self, decision: Decision, gen: GenerationRecord | None) -> Delivery | None:
        if gen is None:
            return None
        if decision.verdict is Verdict.RESUME and decision.claim is not None:
            seq = decision.claim.seq
            return Delivery(gen.token, seq, gen.tail_seq - seq)
        if decision.reason is Reason.SUPERSEDED:
            detail = await self.stream(gen.stream_id, gen.tenant)
            current = next((g for g in detail.generations if g.current), None)
            if (
                current is not None
                and current.head_seq == 1
                and not current.expired
                and current.contiguous
            ):
                return Delivery(current.token, 0, current.tail_seq)
        return None

    async def decisions(self, where: DecisionFilter, limit: int) -> list[DecisionEntry]:
        """The newest recorded decisions (the buffer is written out first)."""
        await self._audit.flush()
        return await self._decisions.recent(where, limit)

    async def stats(self) -> Stats:
        """Totals of the log and the audit log's verdicts by reason."""
        await self._audit.flush()
        return Stats(await self._inspector.totals(), await self._decisions.verdict_counts())

"""The operator's use cases: look inside every tenant's streams, explain a decision, act.

`explain` is a resume that delivers nothing and records nothing: it runs the same read path
(`app/service/reading.py`) on the same state, so its verdict is the one a resume would get.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection

from app.domain.decision import Reason, ScopeReason, Verdict
from app.domain.ids import StreamKey
from app.errors import AmbiguousStream, UnknownStream
from app.service.audit import DecisionAudit
from app.service.clock import Clock, utc_now
from app.service.reading import Reading, ReadPath
from app.service.retention import RetentionWorker
from app.storage import decisions, generations
from app.storage.database import Database
from app.storage.decisions import DecisionFilter
from app.storage.records import (
    DecisionEntry,
    EventPage,
    GenerationRecord,
    StreamRecord,
    Totals,
)


@dataclass(frozen=True, slots=True)
class StreamDetail:
    """A stream with every generation it still has, in epoch order."""

    stream_id: str
    tenant: str
    created_at: datetime
    updated_at: datetime
    generations: list[GenerationRecord]


@dataclass(frozen=True, slots=True)
class Purged:
    """What purging a stream did: generations tombstoned now, events deleted."""

    stream_id: str
    tenant: str
    tombstoned: int
    purged_events: int


@dataclass(frozen=True, slots=True)
class Explanation:
    """A dry-run resume: the reading, and what it would deliver in all."""

    reading: Reading

    @property
    def after(self) -> int:
        """The seq the delivered events follow."""
        return self.reading.after

    @property
    def would_deliver(self) -> int:
        """The count of events the resume would deliver, through the generation's tail."""
        delivered = self.reading.delivered
        return 0 if delivered is None else delivered.tail_seq - self.reading.after


@dataclass(frozen=True, slots=True)
class Stats:
    """Totals across the log and the verdicts in the audit log, by (verdict, reason)."""

    totals: Totals
    verdicts: dict[tuple[str, str], int]


class AdminService:
    """Cross-tenant reads, explain, force-terminate, purge, the audit log and stats."""

    def __init__(
        self,
        database: Database,
        reads: ReadPath,
        audit: DecisionAudit,
        retention: RetentionWorker,
        clock: Clock = utc_now,
    ) -> None:
        self._database = database
        self._reads = reads
        self._audit = audit
        self._retention = retention
        self._clock = clock

    async def streams(
        self, *, prefix: str, tenant: str | None, after: StreamKey | None, limit: int
    ) -> list[StreamRecord]:
        """A page of streams (every tenant's unless `tenant` is given)."""

        def read(conn: Connection) -> list[StreamRecord]:
            return generations.list_streams(
                conn, prefix=prefix, tenant=tenant, after=after, limit=limit
            )

        return await self._database.read(read)

    async def stream(self, stream_id: str, tenant: str | None) -> StreamDetail:
        """A stream and all its generations; `tenant` is needed only when the id repeats."""

        def read(conn: Connection) -> StreamDetail:
            key = _resolve(conn, stream_id, tenant)
            record = generations.stream(conn, key)
            assert record is not None  # one snapshot: `_resolve` just saw it
            return StreamDetail(
                key.stream_id,
                key.tenant,
                record.created_at,
                record.updated_at,
                generations.of_stream(conn, key),
            )

        return await self._database.read(read)

    async def generation(self, token: str) -> GenerationRecord:
        """One generation by token, whatever its tenant."""
        return await self._database.read(lambda conn: generations.get(conn, token))

    async def page(
        self, token: str, *, after: int, limit: int
    ) -> tuple[GenerationRecord, EventPage]:
        """A page of a generation's events; refused (never skipped) as for writers."""
        return await self._reads.page(token, tenant=None, after=after, limit=limit)

    async def terminate(self, token: str) -> GenerationRecord:
        """Force a stuck generation terminal at its tail (idempotent)."""
        now = self._clock()
        return await self._database.write(lambda conn: generations.terminate(conn, token, now))

    async def purge(self, stream_id: str, tenant: str | None) -> Purged:
        """Purge a stream's events; its generations stay as tombstones (`expired`)."""
        key = await self._database.read(lambda conn: _resolve(conn, stream_id, tenant))
        tombstoned, purged = await self._retention.purge_stream(key)
        return Purged(key.stream_id, key.tenant, tombstoned, purged)

    async def explain(
        self, last_event_id: str, *, stream_id: str | None, tenant: str | None, limit: int
    ) -> Explanation:
        """The decision on a claim as a dry run, with every row of the table it checked.

        With `tenant` the token is looked up as that tenant's writer would see it; without,
        across every tenant.
        """
        reading = await self._reads.decide(
            last_event_id, tenant=tenant, asked_stream=stream_id, limit=limit
        )
        return Explanation(reading)

    async def decisions(
        self,
        *,
        stream_id: str | None = None,
        verdict: Verdict | None = None,
        reason: Reason | ScopeReason | None = None,
        tenant: str | None = None,
        limit: int,
    ) -> list[DecisionEntry]:
        """The newest recorded decisions matching every filter given, newest first.

        The audit buffer is written out first, so a decision just made is listed.
        """
        where = DecisionFilter(
            stream_id=stream_id,
            verdict=None if verdict is None else verdict.value,
            reason=None if reason is None else reason.value,
            tenant=tenant,
        )
        await self._audit.flush()
        return await self._database.read(lambda conn: decisions.recent(conn, where, limit))

    async def stats(self) -> Stats:
        """Totals of the log and the audit log's verdicts by reason."""
        await self._audit.flush()

        def read(conn: Connection) -> Stats:
            return Stats(generations.totals(conn), decisions.verdict_counts(conn))

        return await self._database.read(read)


def _resolve(conn: Connection, stream_id: str, tenant: str | None) -> StreamKey:
    tenants = generations.tenants_of(conn, stream_id)
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

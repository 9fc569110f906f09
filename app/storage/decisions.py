"""The decision audit log's SQL: record a batch, list recent ones, count, trim."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.engine import Engines
from app.storage.schema import decisions
from app.storage.writer import Writer

MAX_LAST_EVENT_ID = 300  # a longer claim is malformed anyway; its first 300 chars are kept


@dataclass(frozen=True, slots=True)
class DecisionEntry:
    """One resume decision as the audit log keeps it (never any event data)."""

    decided_at: datetime
    tenant: str
    stream_id: str | None
    last_event_id: str
    verdict: str
    reason: str
    generation: str | None
    events: int


@dataclass(frozen=True, slots=True)
class DecisionFilter:
    """Which recorded decisions to list; None matches any."""

    stream_id: str | None = None
    verdict: str | None = None
    reason: str | None = None
    tenant: str | None = None


class DecisionStore:
    """Reads and writes the `decisions` table."""

    def __init__(self, engines: Engines, writer: Writer) -> None:
        self._engines = engines
        self._writer = writer

    async def record(self, entries: Sequence[DecisionEntry]) -> None:
        """Insert a batch of decisions in one transaction."""
        if not entries:
            return
        rows = [
            asdict(entry) | {"last_event_id": entry.last_event_id[:MAX_LAST_EVENT_ID]}
            for entry in entries
        ]

        async def insert_in(conn: AsyncConnection) -> None:
            await conn.execute(insert(decisions), rows)

        await self._writer.run(insert_in, weight=len(rows))

    async def recent(self, where: DecisionFilter, limit: int) -> list[DecisionEntry]:
        """The newest decisions matching `where`, newest first."""
        query = select(decisions).order_by(decisions.c.id.desc()).limit(limit)
        for column, value in (
            (decisions.c.stream_id, where.stream_id),
            (decisions.c.verdict, where.verdict),
            (decisions.c.reason, where.reason),
            (decisions.c.tenant, where.tenant),
        ):
            if value is not None:
                query = query.where(column == value)
        async with self._engines.read() as conn:
            rows = (await conn.execute(query)).all()
        return [
            DecisionEntry(
                decided_at=row.decided_at,
                tenant=row.tenant,
                stream_id=row.stream_id,
                last_event_id=row.last_event_id,
                verdict=row.verdict,
                reason=row.reason,
                generation=row.generation,
                events=row.events,
            )
            for row in rows
        ]

    async def verdict_counts(self) -> dict[tuple[str, str], int]:
        """How many recorded decisions each (verdict, reason) has."""
        query = select(decisions.c.verdict, decisions.c.reason, func.count()).group_by(
            decisions.c.verdict, decisions.c.reason
        )
        async with self._engines.read() as conn:
            rows = (await conn.execute(query)).all()
        return {(row[0], row[1]): int(row[2]) for row in rows}

    async def trim(self, *, older_than: datetime, keep: int, limit: int) -> int:
        """Delete up to `limit` decisions older than `older_than` or beyond the newest `keep`."""

        async def trim_in(conn: AsyncConnection) -> int:
            newest = (await conn.execute(select(func.max(decisions.c.id)))).scalar_one()
            if newest is None:
                return 0
            doomed = (
                select(decisions.c.id)
                .where((decisions.c.decided_at < older_than) | (decisions.c.id <= newest - keep))
                .order_by(decisions.c.id)
                .limit(limit)
            )
            ids = (await conn.execute(doomed)).scalars().all()
            if ids:
                await conn.execute(delete(decisions).where(decisions.c.id.in_(ids)))
            return len(ids)

        return await self._writer.run(trim_in, weight=limit)

"""The operator's view of the log: every tenant's streams and generations, and the two
operator actions on them (force-terminate, purge).

Writers reach the store through `Store`, always inside one tenant; these queries cross
tenants on purpose and are only reachable with the `admin` scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial

from sqlalchemy import case, func, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.engine import Engines
from app.storage.errors import UnknownGeneration
from app.storage.generations import GENERATION_COLUMNS, to_generation
from app.storage.purge import Tombstoned, delete_events, mark_expired
from app.storage.records import GenerationRecord
from app.storage.schema import events, generations, streams
from app.storage.writer import Writer


@dataclass(frozen=True, slots=True)
class StreamKey:
    """A stream across tenants: stream ids are chosen by writers and may repeat per tenant."""

    tenant: str
    stream_id: str


@dataclass(frozen=True, slots=True)
class StreamSummary:
    """A stream in the admin listing, with its current generation."""

    key: StreamKey
    created_at: datetime
    updated_at: datetime
    generations: int
    current: GenerationRecord | None


@dataclass(frozen=True, slots=True)
class Totals:
    """Counts across the whole log (each generation is in exactly one state)."""

    streams: int
    live: int
    terminal: int
    superseded: int
    expired: int
    retained_events: int
    retained_bytes: int


class Inspector:
    """Cross-tenant reads and the operator actions."""

    def __init__(self, engines: Engines, writer: Writer) -> None:
        self._engines = engines
        self._writer = writer

    async def streams(
        self, *, prefix: str, tenant: str | None, after: StreamKey | None, limit: int
    ) -> list[StreamSummary]:
        """Streams ordered by (stream_id, tenant), after the cursor `after`."""
        query = select(streams).order_by(streams.c.stream_id, streams.c.tenant).limit(limit)
        if prefix:
            query = query.where(streams.c.stream_id.startswith(prefix, autoescape=True))
        if tenant is not None:
            query = query.where(streams.c.tenant == tenant)
        if after is not None:
            position = tuple_(streams.c.stream_id, streams.c.tenant)
            query = query.where(position > tuple_(after.stream_id, after.tenant))
        async with self._engines.read() as conn:
            rows = (await conn.execute(query)).all()
            current = await _current_generations(conn, [row.id for row in rows])
        return [
            StreamSummary(
                key=StreamKey(row.tenant, row.stream_id),
                created_at=row.created_at,
                updated_at=row.updated_at,
                generations=row.last_epoch,
                current=current.get(row.id),
            )
            for row in rows
        ]

    async def tenants_of(self, stream_id: str) -> list[str]:
        """The tenants that have a stream with this id."""
        query = select(streams.c.tenant).where(streams.c.stream_id == stream_id)
        async with self._engines.read() as conn:
            return list((await conn.execute(query.order_by(streams.c.tenant))).scalars())

    async def generations_of(self, key: StreamKey) -> list[GenerationRecord]:
        """Every generation the stream still has (tombstones included), in epoch order."""
        query = (
            select(*GENERATION_COLUMNS)
            .join(streams, streams.c.id == generations.c.stream_pk)
            .where(streams.c.tenant == key.tenant, streams.c.stream_id == key.stream_id)
            .order_by(generations.c.epoch)
        )
        async with self._engines.read() as conn:
            return [to_generation(row._mapping) for row in await conn.execute(query)]

    async def generation(self, token: str) -> GenerationRecord:
        """A generation by token, whatever its tenant; `UnknownGeneration` if none."""
        async with self._engines.read() as conn:
            return await _by_token(conn, token)

    async def terminate(self, token: str, now: datetime) -> GenerationRecord:
        """Make a generation terminal at its current tail (unchanged if it already is)."""

        async def terminate_in(conn: AsyncConnection) -> GenerationRecord:
            # `UnknownGeneration` is raised before anything is written (a group's refusal).
            gen = await _by_token(conn, token, lock=True)
            if gen.terminal:
                return gen
            await conn.execute(
                update(generations)
                .where(generations.c.id == gen.pk)
                .values(terminal=True, terminal_seq=generations.c.tail_seq, terminal_at=now)
            )
            return await _by_token(conn, token)

        return await self._writer.run(terminate_in)

    async def purge(self, key: StreamKey, now: datetime) -> tuple[int, int]:
        """Tombstone every generation of the stream and delete its events.

        Returns (generations tombstoned now, events deleted).
        """
        stream_pk = select(streams.c.id).where(
            streams.c.tenant == key.tenant, streams.c.stream_id == key.stream_id
        )
        mark = partial(
            mark_expired, where=[generations.c.stream_pk.in_(stream_pk)], now=now, limit=500
        )
        marked: list[Tombstoned] = []
        while batch := await self._writer.run(mark):
            marked.extend(batch)
        return len(marked), await delete_events(self._writer, marked)

    async def totals(self) -> Totals:
        """Streams, generations by state, and what is retained, across every tenant."""
        g = generations.c
        state = case(
            (g.expired_at.is_not(None), "expired"),
            (g.terminal, "terminal"),
            (g.superseded_at.is_not(None), "superseded"),
            else_="live",
        )
        async with self._engines.read() as conn:
            stream_count = (await conn.execute(select(func.count()).select_from(streams))).scalar()
            by_state = {
                row[0]: int(row[1])
                for row in await conn.execute(select(state, func.count()).group_by(state))
            }
            sums = (
                await conn.execute(
                    select(
                        func.coalesce(func.sum(g.retained_events), 0),
                        func.coalesce(func.sum(g.retained_bytes), 0),
                    )
                )
            ).one()
        return Totals(
            streams=int(stream_count or 0),
            live=by_state.get("live", 0),
            terminal=by_state.get("terminal", 0),
            superseded=by_state.get("superseded", 0),
            expired=by_state.get("expired", 0),
            retained_events=int(sums[0]),
            retained_bytes=int(sums[1]),
        )

    async def events_after(self, gen: GenerationRecord, seq: int) -> int:
        """How many events are stored after `seq` (a hole shows as fewer than tail - seq)."""
        query = select(func.count()).where(events.c.generation_pk == gen.pk, events.c.seq > seq)
        async with self._engines.read() as conn:
            return int((await conn.execute(query)).scalar_one())


async def _by_token(conn: AsyncConnection, token: str, *, lock: bool = False) -> GenerationRecord:
    query = (
        select(*GENERATION_COLUMNS)
        .join(streams, streams.c.id == generations.c.stream_pk)
        .where(generations.c.token == token)
    )
    if lock:
        query = query.with_for_update(of=generations)
    row = (await conn.execute(query)).one_or_none()
    if row is None:
        raise UnknownGeneration(token)
    return to_generation(row._mapping)


async def _current_generations(
    conn: AsyncConnection, stream_pks: list[int]
) -> dict[int, GenerationRecord]:
    if not stream_pks:
        return {}
    query = (
        select(*GENERATION_COLUMNS)
        .join(streams, streams.c.id == generations.c.stream_pk)
        .where(streams.c.id.in_(stream_pks), generations.c.epoch == streams.c.last_epoch)
    )
    return {row.stream_pk: to_generation(row._mapping) for row in await conn.execute(query)}

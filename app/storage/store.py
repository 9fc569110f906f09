"""The store: every SQL statement of the service, one implementation for both databases.

Each public operation is one transaction (`async with engine.begin()`); callers never
commit. Driver errors leave as `StorageUnavailable` / `StorageError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import RowMapping, Select, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.append import (
    AppendRefused,
    EventBody,
    GenerationState,
    overlap,
    plan_append,
)
from app.domain.ids import new_token
from app.storage.engine import Engines
from app.storage.errors import AppendRefusedError, UnknownGeneration, translated_errors
from app.storage.records import (
    AppendResult,
    EventPage,
    EventRecord,
    GenerationRecord,
    StreamRecord,
)
from app.storage.schema import events, generations, streams
from app.storage.writer import Writer, writer_for

# Pages are read in chunks so that a page's memory is bounded by its byte budget, not by
# its event count times the largest event allowed.
_READ_CHUNK = 256

_GENERATION_COLUMNS = (
    generations,
    streams.c.stream_id,
    streams.c.tenant,
)


@dataclass(frozen=True, slots=True)
class NewGeneration:
    """What a writer asks for when it opens a generation."""

    reason: str | None
    producer: str | None
    max_events: int
    ttl_seconds: int


class Store:
    """The durable event log: streams, their generations, and the generations' events."""

    def __init__(self, engines: Engines) -> None:
        self._engines = engines
        self._writer = writer_for(engines.write)

    @property
    def writer(self) -> Writer:
        """The process's write path; other stores on this database write through it too."""
        return self._writer

    async def close(self) -> None:
        """Stop taking writes (queued ones are refused as unavailable)."""
        await self._writer.close()

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[SnapshotReader]:
        """A read-only view in which every read sees the same committed state."""
        with translated_errors():
            async with self._engines.snapshot.begin() as conn:
                yield SnapshotReader(conn)

    async def open_generation(
        self, tenant: str, stream_id: str, request: NewGeneration, now: datetime
    ) -> GenerationRecord:
        """Create the stream if needed, supersede its current generation, open a new one."""

        async def open_in(conn: AsyncConnection) -> GenerationRecord:
            await conn.execute(
                _insert_ignore(conn).values(
                    tenant=tenant,
                    stream_id=stream_id,
                    last_epoch=0,
                    created_at=now,
                    updated_at=now,
                )
            )
            # The stream row's lock serialises opens: epochs stay distinct, one is current.
            stream = (
                await conn.execute(
                    select(streams.c.id, streams.c.last_epoch)
                    .where(streams.c.tenant == tenant, streams.c.stream_id == stream_id)
                    .with_for_update()
                )
            ).one()
            epoch = stream.last_epoch + 1
            previous = await self._supersede(conn, stream.id, stream.last_epoch, now)
            token = new_token()
            await conn.execute(
                insert(generations).values(
                    token=token,
                    stream_pk=stream.id,
                    epoch=epoch,
                    reason=request.reason or ("initial" if epoch == 1 else "reset"),
                    producer=request.producer,
                    head_seq=1,
                    tail_seq=0,
                    retained_events=0,
                    retained_bytes=0,
                    terminal=False,
                    terminal_seq=None,
                    max_events=request.max_events,
                    ttl_seconds=request.ttl_seconds,
                    supersedes=previous,
                    created_at=now,
                    last_append_at=now,
                    expires_at=now + timedelta(seconds=request.ttl_seconds),
                )
            )
            await conn.execute(
                update(streams)
                .where(streams.c.id == stream.id)
                .values(last_epoch=epoch, updated_at=now)
            )
            return await _generation_by_token(conn, tenant, token, lock=False)

        return await self._writer.run(open_in)

    async def _supersede(
        self, conn: AsyncConnection, stream_pk: int, epoch: int, now: datetime
    ) -> str | None:
        if epoch == 0:
            return None
        result = await conn.execute(
            update(generations)
            .where(generations.c.stream_pk == stream_pk, generations.c.epoch == epoch)
            .values(superseded_at=now)
            .returning(generations.c.token)
        )
        token: str | None = result.scalar_one_or_none()
        return token

    async def append(
        self,
        tenant: str,
        token: str,
        batch: Sequence[EventBody],
        *,
        first_seq: int | None,
        terminal: bool,
        now: datetime,
    ) -> AppendResult:
        """Store a batch atomically, or recognise it as a retry, or refuse it."""

        async def append_in(conn: AsyncConnection) -> AppendResult:
            # Every refusal is raised before the first write (see app/storage/writer.py).
            gen = await _generation_by_token(conn, tenant, token, lock=True)
            state = GenerationState(
                head_seq=gen.head_seq,
                tail_seq=gen.tail_seq,
                current=gen.current,
                terminal=gen.terminal,
                terminal_seq=gen.terminal_seq,
                expired=gen.expired,
            )
            claimed = overlap(state, first_seq, len(batch))
            stored = await _bodies(conn, gen.pk, claimed) if claimed else {}
            plan = plan_append(state, batch, first_seq=first_seq, terminal=terminal, stored=stored)
            if isinstance(plan, AppendRefused):
                raise AppendRefusedError(plan.refusal, plan.detail)
            if plan.duplicate:
                return AppendResult(gen, plan.first_seq, plan.count, duplicate=True)
            if batch:
                await conn.execute(insert(events), _event_rows(gen.pk, plan.first_seq, batch))
            appended_bytes = sum(len(body.data.encode()) for body in batch)
            updated = await _advance(conn, gen, plan.last_seq, appended_bytes, terminal, now)
            evicted = updated.head_seq - gen.head_seq
            return AppendResult(
                updated, plan.first_seq, plan.count, duplicate=False, evicted=evicted
            )

        return await self._writer.run(append_in, weight=max(1, len(batch)))

    async def generation(self, tenant: str, token: str) -> GenerationRecord:
        """One generation by token, or `UnknownGeneration`."""
        async with self.snapshot() as snap:
            return await snap.generation(tenant, token)

    async def stream(self, tenant: str, stream_id: str) -> StreamRecord | None:
        """A stream with its current generation, or None."""
        async with self.snapshot() as snap:
            return await snap.stream(tenant, stream_id)


class SnapshotReader:
    """Reads inside one consistent snapshot (see `Store.snapshot`)."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def find_generation(self, tenant: str, token: str) -> GenerationRecord | None:
        """The generation with that token for this tenant, or None."""
        row = (await self._conn.execute(_select_generation(tenant, token=token))).one_or_none()
        return None if row is None else _to_generation(row._mapping)

    async def generation(self, tenant: str, token: str) -> GenerationRecord:
        """The generation with that token for this tenant, or `UnknownGeneration`."""
        return await _generation_by_token(self._conn, tenant, token, lock=False)

    async def current_generation(self, stream_pk: int) -> GenerationRecord | None:
        """The stream's current generation (the one with its newest epoch)."""
        query = (
            select(*_GENERATION_COLUMNS)
            .join(streams, streams.c.id == generations.c.stream_pk)
            .where(streams.c.id == stream_pk, generations.c.epoch == streams.c.last_epoch)
        )
        row = (await self._conn.execute(query)).one_or_none()
        return None if row is None else _to_generation(row._mapping)

    async def stream(self, tenant: str, stream_id: str) -> StreamRecord | None:
        """A stream with its current generation, or None."""
        row = (
            await self._conn.execute(
                select(streams).where(streams.c.tenant == tenant, streams.c.stream_id == stream_id)
            )
        ).one_or_none()
        if row is None:
            return None
        return StreamRecord(
            stream_id=row.stream_id,
            tenant=row.tenant,
            created_at=row.created_at,
            updated_at=row.updated_at,
            generations=row.last_epoch,
            current=await self.current_generation(row.id),
        )

    async def events(
        self, gen: GenerationRecord, *, after: int, limit: int, max_bytes: int
    ) -> EventPage:
        """Events with seq in (after, …], at most `limit` of them and about `max_bytes`.

        The page always holds at least one event when any is due, so a single event larger
        than `max_bytes` is still delivered. `through` is the last seq the page covers; a
        missing seq in between shows as `EventPage.contiguous` being False.
        """
        upto = min(after + limit, gen.tail_seq)
        collected: list[EventRecord] = []
        size = 0
        cursor = after
        while cursor < upto:
            rows = (
                await self._conn.execute(
                    select(events.c.seq, events.c.event, events.c.data, events.c.nbytes)
                    .where(
                        events.c.generation_pk == gen.pk,
                        events.c.seq > cursor,
                        events.c.seq <= upto,
                    )
                    .order_by(events.c.seq)
                    .limit(_READ_CHUNK)
                )
            ).all()
            for row in rows:
                if collected and size + row.nbytes > max_bytes:
                    return EventPage(after, collected[-1].seq, tuple(collected))
                collected.append(EventRecord(row.seq, row.event, row.data))
                size += row.nbytes
            if len(rows) < _READ_CHUNK:
                break
            cursor = rows[-1].seq
        return EventPage(after, upto, tuple(collected))


def _insert_ignore(conn: AsyncConnection) -> Any:
    """`INSERT … ON CONFLICT DO NOTHING` into streams, in the connection's dialect."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(streams).on_conflict_do_nothing(
        index_elements=[streams.c.tenant, streams.c.stream_id]
    )


def _select_generation(tenant: str, *, token: str) -> Select[Any]:
    return (
        select(*_GENERATION_COLUMNS)
        .join(streams, streams.c.id == generations.c.stream_pk)
        .where(generations.c.token == token, streams.c.tenant == tenant)
    )


async def _generation_by_token(
    conn: AsyncConnection, tenant: str, token: str, *, lock: bool
) -> GenerationRecord:
    query = _select_generation(tenant, token=token)
    if lock:
        # Appends to one generation serialise on its row (PostgreSQL); on SQLite the
        # write transaction already holds the database lock and this renders as nothing.
        query = query.with_for_update(of=generations)
    row = (await conn.execute(query)).one_or_none()
    if row is None:
        raise UnknownGeneration(token)
    return _to_generation(row._mapping)


def _to_generation(row: RowMapping) -> GenerationRecord:
    return GenerationRecord(
        pk=row["id"],
        token=row["token"],
        stream_pk=row["stream_pk"],
        stream_id=row["stream_id"],
        tenant=row["tenant"],
        epoch=row["epoch"],
        reason=row["reason"],
        producer=row["producer"],
        head_seq=row["head_seq"],
        tail_seq=row["tail_seq"],
        retained_events=row["retained_events"],
        retained_bytes=row["retained_bytes"],
        terminal=row["terminal"],
        terminal_seq=row["terminal_seq"],
        max_events=row["max_events"],
        ttl_seconds=row["ttl_seconds"],
        supersedes=row["supersedes"],
        created_at=row["created_at"],
        last_append_at=row["last_append_at"],
        expires_at=row["expires_at"],
        terminal_at=row["terminal_at"],
        superseded_at=row["superseded_at"],
        expired_at=row["expired_at"],
    )


async def _bodies(conn: AsyncConnection, gen_pk: int, seqs: range) -> dict[int, EventBody]:
    rows = await conn.execute(
        select(events.c.seq, events.c.event, events.c.data).where(
            events.c.generation_pk == gen_pk,
            events.c.seq >= seqs.start,
            events.c.seq < seqs.stop,
        )
    )
    return {row.seq: EventBody(data=row.data, event=row.event) for row in rows}


def _event_rows(gen_pk: int, first_seq: int, batch: Sequence[EventBody]) -> list[dict[str, Any]]:
    return [
        {
            "generation_pk": gen_pk,
            "seq": seq,
            "event": body.event,
            "data": body.data,
            "nbytes": len(body.data.encode()),
        }
        for seq, body in enumerate(batch, start=first_seq)
    ]


async def _advance(
    conn: AsyncConnection,
    gen: GenerationRecord,
    tail: int,
    appended_bytes: int,
    terminal: bool,
    now: datetime,
) -> GenerationRecord:
    """Move the tail, evict past `max_events` in the same transaction, mark terminal."""
    head = gen.head_seq
    retained = gen.retained_events + (tail - gen.tail_seq)
    retained_bytes = gen.retained_bytes + appended_bytes
    if tail - head + 1 > gen.max_events:
        new_head = tail - gen.max_events + 1
        evicted = events.c.generation_pk == gen.pk, events.c.seq < new_head
        evicted_bytes = (
            await conn.execute(select(func.coalesce(func.sum(events.c.nbytes), 0)).where(*evicted))
        ).scalar_one()
        removed = (await conn.execute(delete(events).where(*evicted))).rowcount
        head, retained, retained_bytes = (
            new_head,
            retained - removed,
            retained_bytes - evicted_bytes,
        )
    values: dict[str, Any] = {
        "head_seq": head,
        "tail_seq": tail,
        "retained_events": retained,
        "retained_bytes": retained_bytes,
        "last_append_at": now,
        "expires_at": now + timedelta(seconds=gen.ttl_seconds),
    }
    if terminal:
        values |= {"terminal": True, "terminal_seq": tail, "terminal_at": now}
    await conn.execute(update(generations).where(generations.c.id == gen.pk).values(**values))
    return replace(gen, **values)

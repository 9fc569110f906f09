"""The store: the writer API's reads and writes, one implementation for both databases.

Each public operation is one transaction; callers never commit. Reads run in one
snapshot (`Store.snapshot`); the two hot writes (`app/storage/writes.py`) go through the
process's writer (`app/storage/writer.py`). Driver errors leave as `StorageUnavailable`
/ `StorageError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.append import EventBody
from app.storage import writes
from app.storage.engine import Engines
from app.storage.errors import UnknownGeneration
from app.storage.generations import GENERATION_COLUMNS, select_generation, to_generation
from app.storage.records import (
    AppendResult,
    EventPage,
    EventRecord,
    GenerationRecord,
    StreamRecord,
)
from app.storage.schema import events, generations, streams
from app.storage.writer import Writer, writer_for
from app.storage.writes import NewGeneration

# Pages are read in chunks so that a page's memory is bounded by its byte budget, not by
# its event count times the largest event allowed.
_READ_CHUNK = 256

__all__ = ["NewGeneration", "SnapshotReader", "Store"]


class Store:
    """The durable event log: streams, their generations, and the generations' events."""

    def __init__(self, engines: Engines) -> None:
        self._engines = engines
        self._writer = writer_for(engines.write, engines.sync_write)

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
        async with self._engines.read() as conn:
            yield SnapshotReader(conn)

    async def open_generation(
        self, tenant: str, stream_id: str, request: NewGeneration, now: datetime
    ) -> GenerationRecord:
        """Create the stream if needed, supersede its current generation, open a new one."""
        work = partial(
            writes.open_generation, tenant=tenant, stream_id=stream_id, request=request, now=now
        )
        return await self._writer.run_sync(work)

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
        work = partial(
            writes.append,
            tenant=tenant,
            token=token,
            batch=batch,
            first_seq=first_seq,
            terminal=terminal,
            now=now,
        )
        return await self._writer.run_sync(work, weight=max(1, len(batch)))

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
        row = (await self._conn.execute(select_generation(tenant, token=token))).one_or_none()
        return None if row is None else to_generation(row._mapping)

    async def generation(self, tenant: str, token: str) -> GenerationRecord:
        """The generation with that token for this tenant, or `UnknownGeneration`."""
        return await _generation_by_token(self._conn, tenant, token, lock=False)

    async def current_generation(self, stream_pk: int) -> GenerationRecord | None:
        """The stream's current generation (the one with its newest epoch)."""
        query = (
            select(*GENERATION_COLUMNS)
            .join(streams, streams.c.id == generations.c.stream_pk)
            .where(streams.c.id == stream_pk, generations.c.epoch == streams.c.last_epoch)
        )
        row = (await self._conn.execute(query)).one_or_none()
        return None if row is None else to_generation(row._mapping)

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


async def _generation_by_token(
    conn: AsyncConnection, tenant: str, token: str, *, lock: bool
) -> GenerationRecord:
    query = select_generation(tenant, token=token)
    if lock:
        # Appends to one generation serialise on its row (PostgreSQL); on SQLite the
        # write transaction already holds the database lock and this renders as nothing.
        query = query.with_for_update(of=generations)
    row = (await conn.execute(query)).one_or_none()
    if row is None:
        raise UnknownGeneration(token)
    return to_generation(row._mapping)

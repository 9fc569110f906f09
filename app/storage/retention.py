"""The retention worker's SQL: expire by TTL, cap generations per stream, drop old tombstones.

Every operation takes one small batch in its own transaction; the service loops over them.
On PostgreSQL one advisory lock makes the whole pass exclusive across replicas.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial

from sqlalchemy import delete, exists, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.engine import Engines
from app.storage.errors import translated_errors
from app.storage.purge import Tombstoned, delete_events, mark_expired
from app.storage.schema import generations, streams
from app.storage.writer import Writer

# An arbitrary constant that names "the retention pass" among the database's advisory locks.
RETENTION_LOCK_KEY = 0x6576_6C6F_6772_6574  # "evlogret"


class RetentionStore:
    """Batches of retention work, each one short transaction."""

    def __init__(self, engines: Engines, writer: Writer) -> None:
        self._engines = engines
        self._writer = writer

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[bool]:
        """Hold the retention lock for a pass; yields False when another process holds it.

        PostgreSQL: a session-level advisory lock on a connection kept for the pass (it is
        released if that connection dies). SQLite serves one machine and serialises every
        write on its database lock, so there the pass is simply allowed.
        """
        if self._engines.base.dialect.name != "postgresql":
            yield True
            return
        with translated_errors():
            async with self._engines.base.connect() as conn:
                locked = bool(
                    (
                        await conn.execute(
                            text("SELECT pg_try_advisory_lock(:key)"), {"key": RETENTION_LOCK_KEY}
                        )
                    ).scalar_one()
                )
                # The lock is the session's; ending the transaction keeps it, and keeps this
                # connection from sitting "idle in transaction" for the whole pass.
                await conn.commit()
                try:
                    yield locked
                finally:
                    if locked:
                        await conn.execute(
                            text("SELECT pg_advisory_unlock(:key)"), {"key": RETENTION_LOCK_KEY}
                        )
                        await conn.commit()

    async def expire_due(self, now: datetime, limit: int) -> list[Tombstoned]:
        """Tombstone up to `limit` generations whose TTL ran out (no write since)."""
        due = [generations.c.expires_at <= now]
        return await self._writer.run(partial(mark_expired, where=due, now=now, limit=limit))

    async def cap_generations(self, keep: int, now: datetime, limit: int) -> list[Tombstoned]:
        """Tombstone up to `limit` generations older than their stream's newest `keep`."""
        last_epoch = (
            select(streams.c.last_epoch)
            .where(streams.c.id == generations.c.stream_pk)
            .scalar_subquery()
        )
        old = [generations.c.epoch <= last_epoch - keep]
        return await self._writer.run(partial(mark_expired, where=old, now=now, limit=limit))

    async def delete_events(self, tombstones: list[Tombstoned]) -> int:
        """Delete the events of freshly marked tombstones (chunked)."""
        return await delete_events(self._writer, tombstones)

    async def delete_tombstones(self, expired_before: datetime, limit: int) -> int:
        """Delete up to `limit` tombstones that expired before `expired_before`."""
        query = (
            select(generations.c.id)
            .where(generations.c.expired_at < expired_before)
            .order_by(generations.c.id)
            .limit(limit)
        )

        async def delete_in(conn: AsyncConnection) -> int:
            ids = (await conn.execute(query)).scalars().all()
            if ids:
                await conn.execute(delete(generations).where(generations.c.id.in_(ids)))
            return len(ids)

        return await self._writer.run(delete_in, weight=limit)

    async def delete_empty_streams(self, idle_before: datetime, limit: int) -> int:
        """Delete up to `limit` streams with no generation left, idle since `idle_before`."""
        empty = ~exists().where(generations.c.stream_pk == streams.c.id)
        query = (
            select(streams.c.id)
            .where(streams.c.updated_at < idle_before, empty)
            .order_by(streams.c.id)
            .limit(limit)
        )

        async def delete_in(conn: AsyncConnection) -> int:
            locked = query
            if conn.dialect.name == "postgresql":
                # A writer opening a generation holds its stream's row: leave that one be.
                locked = query.with_for_update(skip_locked=True)
            ids = (await conn.execute(locked)).scalars().all()
            if ids:
                await conn.execute(delete(streams).where(streams.c.id.in_(ids), empty))
            return len(ids)

        return await self._writer.run(delete_in, weight=limit)

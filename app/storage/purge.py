"""Turning generations into tombstones: the one way events leave other than eviction.

A tombstone is a generation whose events are gone but whose row stays: `expired_at` is
set, `head_seq = tail_seq + 1` and nothing is retained, so a resume is answered `reset`
/`expired` (not `invalid`/`unknown_generation`) for as long as the tombstone is kept.

Marking is one short transaction over a few rows; the events are then deleted in chunks
of seq ranges, each its own transaction, so no lock is held for long whatever the size of
a generation. Only seqs up to the tail at marking time are deleted. Every write goes
through the process's `Writer` (on SQLite, the group committer that appends use), so
retention never fights appends for SQLite's lock in its busy handler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.schema import events, generations
from app.storage.writer import Writer

# Events deleted per transaction: small enough that an append waiting behind the delete
# (SQLite's database lock) waits milliseconds, not seconds.
DELETE_CHUNK = 2_000


@dataclass(frozen=True, slots=True)
class Tombstoned:
    """A generation just marked expired: its pk and the tail its events end at."""

    pk: int
    tail_seq: int


async def mark_expired(
    conn: AsyncConnection, *, where: Sequence[ColumnElement[bool]], now: datetime, limit: int
) -> list[Tombstoned]:
    """Mark up to `limit` live generations matching `where` as tombstones, in `conn`.

    On PostgreSQL rows another transaction holds (an append in flight) are skipped, not
    waited for; the condition is re-checked on the locked row, so an append that moved
    `expires_at` forward wins. SQLite's write lock makes the whole transaction serial.
    """
    query = (
        select(generations.c.id, generations.c.tail_seq)
        .where(generations.c.expired_at.is_(None), *where)
        .order_by(generations.c.id)
        .limit(limit)
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    rows = (await conn.execute(query)).all()
    if not rows:
        return []
    await conn.execute(
        update(generations)
        .where(generations.c.id.in_([row.id for row in rows]))
        .values(
            expired_at=now,
            head_seq=generations.c.tail_seq + 1,
            retained_events=0,
            retained_bytes=0,
        )
    )
    return [Tombstoned(row.id, row.tail_seq) for row in rows]


async def delete_events(writer: Writer, tombstones: Sequence[Tombstoned]) -> int:
    """Delete the events of marked generations, chunk by chunk; how many were deleted."""
    deleted = 0
    for tomb in tombstones:
        while count := await writer.run(partial(_delete_chunk, tomb=tomb), weight=DELETE_CHUNK):
            deleted += count
    return deleted


async def _delete_chunk(conn: AsyncConnection, *, tomb: Tombstoned) -> int:
    owned = events.c.generation_pk == tomb.pk, events.c.seq <= tomb.tail_seq
    lowest = (await conn.execute(select(func.min(events.c.seq)).where(*owned))).scalar_one()
    if lowest is None:
        return 0
    result = await conn.execute(delete(events).where(*owned, events.c.seq < lowest + DELETE_CHUNK))
    return int(result.rowcount)

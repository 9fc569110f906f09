"""Retention's SQL: tombstones (by TTL, by a per-stream cap, by an operator's purge), the
deletion of their events, old tombstones and empty streams.

A tombstone is a generation whose events are gone but whose row stays: `expired_at` is set,
`head_seq = tail_seq + 1` and nothing is retained, so a resume is answered `reset`/`expired`
(not `invalid`/`unknown_generation`) for as long as the tombstone is kept.

Each function is one small batch inside the caller's transaction (the service loops over
them, one short transaction each), so no lock is held for long whatever the size of a
generation. Only seqs up to the tail at marking time are deleted.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, delete, exists, select, update
from sqlalchemy.engine import Connection

from app.domain.ids import StreamKey
from app.storage.changes import touched
from app.storage.records import Tombstoned
from app.storage.schema import generations, streams

# An arbitrary constant that names "the retention pass" among the database's advisory locks.
RETENTION_LOCK_KEY = 0x6576_6C6F_6772_6574  # "evlogret"


def _mark_expired(
    conn: Connection, condition: ColumnElement[bool], now: datetime, limit: int
) -> list[Tombstoned]:
    """Mark up to `limit` live generations matching `condition` as tombstones.

    On PostgreSQL rows another transaction holds (an append in flight) are skipped, not
    waited for; the condition is re-checked on the locked row, so an append that moved
    `expires_at` forward wins. SQLite's write lock makes the whole transaction serial.
    """
    query = (
        select(generations.c.id, generations.c.stream_pk, generations.c.tail_seq)
        .where(generations.c.expired_at.is_(None), condition)
        .order_by(generations.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    rows = conn.execute(query).all()
    if not rows:
        return []
    conn.execute(
        update(generations)
        .where(generations.c.id.in_([row.id for row in rows]))
        .values(
            expired_at=now,
            head_seq=generations.c.tail_seq + 1,
            retained_events=0,
            retained_bytes=0,
        )
    )
    for row in rows:
        touched(conn, row.stream_pk)
    return [Tombstoned(row.id, row.tail_seq) for row in rows]


def expire_due(conn: Connection, now: datetime, limit: int) -> list[Tombstoned]:
    """Tombstone up to `limit` generations whose TTL ran out (no write since)."""
    return _mark_expired(conn, generations.c.expires_at <= now, now, limit)


def cap_generations(conn: Connection, keep: int, now: datetime, limit: int) -> list[Tombstoned]:
    """Tombstone up to `limit` generations older than their stream's newest `keep`."""
    last_epoch = (
        select(streams.c.last_epoch)
        .where(streams.c.id == generations.c.stream_pk)
        .scalar_subquery()
    )
    return _mark_expired(conn, generations.c.epoch <= last_epoch - keep, now, limit)


def tombstone_stream(
    conn: Connection, key: StreamKey, now: datetime, limit: int
) -> list[Tombstoned]:
    """Tombstone up to `limit` live generations of one stream (an operator's purge)."""
    stream_pk = select(streams.c.id).where(
        streams.c.tenant == key.tenant, streams.c.stream_id == key.stream_id
    )
    return _mark_expired(conn, generations.c.stream_pk.in_(stream_pk), now, limit)


def delete_tombstones(conn: Connection, expired_before: datetime, limit: int) -> int:
    """Delete up to `limit` tombstones that expired before `expired_before`."""
    query = (
        select(generations.c.id)
        .where(generations.c.expired_at < expired_before)
        .order_by(generations.c.id)
        .limit(limit)
    )
    ids = conn.execute(query).scalars().all()
    if ids:
        conn.execute(delete(generations).where(generations.c.id.in_(ids)))
    return len(ids)


def delete_empty_streams(conn: Connection, idle_before: datetime, limit: int) -> int:
    """Delete up to `limit` streams with no generation left, idle since `idle_before`."""
    empty = ~exists().where(generations.c.stream_pk == streams.c.id)
    query = (
        select(streams.c.id)
        .where(streams.c.updated_at < idle_before, empty)
        .order_by(streams.c.id)
        .limit(limit)
        # A writer opening a generation holds its stream's row: leave that one be.
        .with_for_update(skip_locked=True)
    )
    ids = conn.execute(query).scalars().all()
    if ids:
        conn.execute(delete(streams).where(streams.c.id.in_(ids), empty))
    return len(ids)

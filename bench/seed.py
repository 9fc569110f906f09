"""Seeding stored history fast: straight into the database through the service's schema.

Going through HTTP would take longer than the measurements themselves at 1M events. The
rows are written with the tables of `app/storage/schema.py` after `alembic upgrade head`
(`app.storage.migrate.upgrade`), so the service reads exactly what it would have written:
streams with several generations each (the older ones superseded), contiguous events.
PostgreSQL events go in with COPY, SQLite ones with one executemany per chunk.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.storage.migrate import upgrade
from app.storage.schema import events, generations, streams
from bench.loads.payload import EVENT_TYPE, NBYTES, PROGRESS

TENANT = "default"  # the tenant of an open (key-less) service
TTL_SECONDS = 30 * 86_400
_CHUNK = 50_000


@dataclass(frozen=True, slots=True)
class Layout:
    """How seeded history is spread: streams x generations x events per generation."""

    generations_per_stream: int = 2
    events_per_generation: int = 100

    @property
    def events_per_stream(self) -> int:
        """Events stored per stream (all generations)."""
        return self.generations_per_stream * self.events_per_generation


def migrate(url: str) -> None:
    """`alembic upgrade head` on the database (blocking)."""
    upgrade(url)


def _token() -> str:
    return secrets.token_urlsafe(16)


def _event_rows(gen_pk: int, first: int, count: int) -> list[dict[str, Any]]:
    return [
        {
            "generation_pk": gen_pk,
            "seq": seq,
            "event": EVENT_TYPE,
            "data": PROGRESS,
            "nbytes": NBYTES,
        }
        for seq in range(first, first + count)
    ]


def _generation_row(
    pk: int, stream_pk: int, epoch: int, tail: int, *, current: bool, now: datetime
) -> dict[str, Any]:
    return {
        "id": pk,
        "token": _token(),
        "stream_pk": stream_pk,
        "epoch": epoch,
        "reason": "initial" if epoch == 1 else "failover",
        "producer": "bench",
        "head_seq": 1,
        "tail_seq": tail,
        "retained_events": tail,
        "retained_bytes": tail * NBYTES,
        "terminal": False,
        "terminal_seq": None,
        "max_events": max(tail, 10_000),
        "ttl_seconds": TTL_SECONDS,
        "supersedes": None,
        "created_at": now,
        "last_append_at": now,
        "expires_at": now + timedelta(seconds=TTL_SECONDS),
        "terminal_at": None,
        "superseded_at": None if current else now,
        "expired_at": None,
    }


async def _next_ids(conn: AsyncConnection) -> tuple[int, int]:
    stream_pk = (await conn.execute(select(func.coalesce(func.max(streams.c.id), 0)))).scalar()
    gen_pk = (await conn.execute(select(func.coalesce(func.max(generations.c.id), 0)))).scalar()
    return int(stream_pk or 0) + 1, int(gen_pk or 0) + 1


async def _insert_events(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    if conn.dialect.name == "postgresql":
        raw = (await conn.get_raw_connection()).driver_connection
        assert raw is not None
        columns = ["generation_pk", "seq", "event", "data", "nbytes"]
        records = [tuple(row[c] for c in columns) for row in rows]
        await raw.copy_records_to_table(events.name, records=records, columns=columns)
    else:
        await conn.execute(insert(events), rows)


async def _fix_sequences(conn: AsyncConnection) -> None:
    # Explicit ids do not move PostgreSQL's serial sequences; the service's own inserts
    # (opening generations during the append runs) must not collide with seeded ids.
    if conn.dialect.name != "postgresql":
        return
    for table in (streams.name, generations.name):
        await conn.execute(
            text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table}")  # noqa: S608 (our table names)
        )


async def _seed_streams(
    url: str, prefix: str, first: int, count: int, layout: Layout
) -> list[tuple[str, str]]:
    engine = create_async_engine(url)
    claims: list[tuple[str, str]] = []
    # Chunks of streams bound the rows held in memory (1M events would be ~0.5 GB at once).
    per_chunk = max(1, _CHUNK // layout.events_per_stream)
    try:
        async with engine.begin() as conn:
            for start in range(first, first + count, per_chunk):
                n = min(per_chunk, first + count - start)
                claims += await _seed_chunk(conn, prefix, start, n, layout)
            await _fix_sequences(conn)
    finally:
        await engine.dispose()
    return claims


async def _seed_chunk(
    conn: AsyncConnection, prefix: str, first: int, count: int, layout: Layout
) -> list[tuple[str, str]]:
    now = datetime.now(UTC)
    stream_pk, gen_pk = await _next_ids(conn)
    stream_rows: list[dict[str, Any]] = []
    gen_rows: list[dict[str, Any]] = []
    event_rows: list[dict[str, Any]] = []
    claims: list[tuple[str, str]] = []
    tail = layout.events_per_generation
    for index in range(first, first + count):
        stream_id = f"{prefix}-{index}"
        stream_rows.append(
            {
                "id": stream_pk,
                "tenant": TENANT,
                "stream_id": stream_id,
                "last_epoch": layout.generations_per_stream,
                "created_at": now,
                "updated_at": now,
            }
        )
        for epoch in range(1, layout.generations_per_stream + 1):
            current = epoch == layout.generations_per_stream
            row = _generation_row(gen_pk, stream_pk, epoch, tail, current=current, now=now)
            gen_rows.append(row)
            event_rows += _event_rows(gen_pk, 1, tail)
            if current:
                # Near the tail: the client missed the last 5 events.
                claims.append((stream_id, f"{row['token']}:{tail - 5}"))
            gen_pk += 1
        stream_pk += 1
    await conn.execute(insert(streams), stream_rows)
    await conn.execute(insert(generations), gen_rows)
    await _insert_events(conn, event_rows)
    return claims


def seed_streams(
    url: str, prefix: str, first: int, count: int, layout: Layout
) -> list[tuple[str, str]]:
    """Add streams `prefix-first …` with their generations and events.

    Returns, per stream, a resume claim near the tail of its current generation.
    """
    return asyncio.run(_seed_streams(url, prefix, first, count, layout))


async def _seed_long(url: str, stream_id: str, count: int, token: str | None) -> str:
    engine = create_async_engine(url)
    now = datetime.now(UTC)
    try:
        async with engine.begin() as conn:
            stream_pk, gen_pk = await _next_ids(conn)
            await conn.execute(
                insert(streams).values(
                    id=stream_pk,
                    tenant=TENANT,
                    stream_id=stream_id,
                    last_epoch=1,
                    created_at=now,
                    updated_at=now,
                )
            )
            row = _generation_row(gen_pk, stream_pk, 1, count, current=True, now=now)
            if token is not None:
                row["token"] = token
            await conn.execute(insert(generations), [row])
            for start in range(1, count + 1, _CHUNK):
                n = min(_CHUNK, count + 1 - start)
                await _insert_events(conn, _event_rows(gen_pk, start, n))
            await _fix_sequences(conn)
    finally:
        await engine.dispose()
    token: str = row["token"]
    return token


def seed_long_generation(url: str, stream_id: str, count: int, token: str | None = None) -> str:
    """One stream whose single generation holds `count` events; returns its token.

    `token` names the generation (the raw ceilings address theirs by a known name).
    """
    return asyncio.run(_seed_long(url, stream_id, count, token))

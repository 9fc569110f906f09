"""A write runs as one transaction through the database's write path; a pooled connection
that died before anything was sent costs no error (`transactions.on_open_connection`)."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
from sqlalchemy.engine import Connection, make_url

from app.domain.append import EventBody
from app.domain.ids import StreamKey
from app.settings import Settings
from app.storage import events, generations
from app.storage.database import Database
from app.storage.records import AppendResult


async def test_a_pooled_connection_closed_by_the_server_costs_no_error(
    postgres_database: str,
) -> None:
    """No ping at checkout: a write or read whose pooled connection the server closed runs
    again on a fresh one (nothing was sent before COMMIT), and is stored exactly once."""
    db = Database(Settings(database_url=postgres_database, db_pool_size=2))
    now = datetime.now(UTC)
    opening = generations.NewGeneration(reason=None, producer=None, max_events=9, ttl_seconds=60)
    try:
        gen = await db.write(
            lambda c: generations.open_generation(c, StreamKey("t", "s.closed"), opening, now)
        )
        async with db.connect() as first, db.connect() as second:  # the whole pool
            pids = [
                (await conn.exec_driver_sql("SELECT pg_backend_pid()")).scalar_one()
                for conn in (first, second)
            ]
        killer = await asyncpg.connect(
            make_url(postgres_database)
            .set(drivername="postgresql")
            .render_as_string(hide_password=False)
        )
        try:
            await killer.execute(
                "SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid", pids
            )
        finally:
            await killer.close()

        def append(conn: Connection) -> AppendResult:
            body = [EventBody("x")]
            return events.append(
                conn, "t", gen.token, body, first_seq=None, terminal=False, now=now
            )

        result = await db.write(append)
        assert (result.first_seq, result.duplicate) == (1, False)
        stored = await db.read(lambda c: generations.get(c, gen.token))
        assert (stored.tail_seq, stored.retained_events) == (1, 1)
    finally:
        await db.close()

"""PostgreSQL's announcements: a NOTIFY payload names its sender, and a `Database` skips its
own (its readers were woken at COMMIT)."""

from __future__ import annotations

import asyncio

import asyncpg
from sqlalchemy.engine import make_url

from app.storage.postgres import CHANNEL, PostgresNotifications, parse_payload
from app.storage.wakeups import LocalCommits
from tests.storage.fakes import RecordingHub


def test_a_payload_names_its_origin_and_old_payloads_still_parse() -> None:
    told = parse_payload("ab12;1700000000.5;3,4")
    assert (told.stream_pks, told.sent_at, told.origin) == ({3, 4}, 1700000000.5, "ab12")
    earlier = parse_payload("1700000000.5;7")  # a replica of the previous version
    assert (earlier.stream_pks, earlier.sent_at, earlier.origin) == ({7}, 1700000000.5, None)
    assert parse_payload("garbage").stream_pks == set()  # wakes everyone


async def test_a_database_skips_its_own_notifications(postgres_database: str) -> None:
    """Its readers were woken at COMMIT: its own NOTIFY would wake them (and read) twice.
    Another `Database` in the same process is another origin: its notifications wake."""
    hub = RecordingHub()
    own = LocalCommits().origin
    source = PostgresNotifications(postgres_database, origin=own)
    listener = asyncio.create_task(source.run(hub))
    dsn = make_url(postgres_database).set(drivername="postgresql")
    sender = await asyncpg.connect(dsn.render_as_string(hide_password=False))
    try:
        await asyncio.wait_for(hub.up.wait(), 10)
        hub.woken.clear()  # the catch-up wake-up of a new listener
        for origin in (own, LocalCommits().origin):
            await sender.execute("SELECT pg_notify($1, $2)", CHANNEL, f"{origin};1.0;41")
        await sender.execute("SELECT pg_notify($1, $2)", CHANNEL, f"{own};1.0;42")
        await sender.execute("SELECT pg_notify($1, $2)", CHANNEL, "1.0;43")
        for _ in range(100):
            if len(hub.woken) >= 2:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)
        assert hub.woken == [{41}, {43}]
    finally:
        await sender.close()
        listener.cancel()
        await asyncio.wait([listener])

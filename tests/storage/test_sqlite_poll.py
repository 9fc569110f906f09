"""The SQLite poller for other processes' commits: stopping it never leaves its thread
using the connection it is about to close (closing a stdlib SQLite connection while
another thread runs a statement on it can crash the interpreter — CI saw it once)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy import create_engine, event
from sqlalchemy.engine import make_url

from app.storage.postgres import CHANNEL, PostgresNotifications, parse_payload
from app.storage.sqlite_poll import SqliteDataVersion
from app.storage.wakeups import LocalCommits


class _Hub:
    def __init__(self) -> None:
        self.up = asyncio.Event()

    def source_up(self, _name: str, _up: bool) -> None:
        self.up.set()

    def watched(self) -> list[int]:
        return []

    def wake(self, _pks: Any) -> None:
        pass


async def test_a_stop_during_a_poll_closes_the_connection_only_after_the_poll(
    tmp_path: Path,
) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'p.db'}")
    in_poll = threading.Event()
    release = threading.Event()
    busy: list[bool] = []  # the poll was still running when the connection closed

    @event.listens_for(engine, "before_cursor_execute")
    def _slow_poll(*_args: Any) -> None:
        if hub.up.is_set():
            in_poll.set()
            release.wait(5)

    @event.listens_for(engine, "close")
    def _closing(*_args: Any) -> None:
        busy.append(in_poll.is_set() and not release.is_set())

    hub = _Hub()
    poller = asyncio.create_task(SqliteDataVersion(engine, interval=0.01).run(hub))
    await asyncio.wait_for(hub.up.wait(), 5)
    await asyncio.to_thread(in_poll.wait, 5)
    poller.cancel()
    await asyncio.sleep(0.05)
    assert not poller.done()  # it waits for the statement in its thread
    release.set()
    await asyncio.wait([poller], timeout=5)
    assert poller.cancelled()
    assert busy == [False]


def test_a_payload_names_its_origin_and_old_payloads_still_parse() -> None:
    told = parse_payload("ab12;1700000000.5;3,4")
    assert (told.stream_pks, told.sent_at, told.origin) == ({3, 4}, 1700000000.5, "ab12")
    earlier = parse_payload("1700000000.5;7")  # a replica of the previous version
    assert (earlier.stream_pks, earlier.sent_at, earlier.origin) == ({7}, 1700000000.5, None)
    assert parse_payload("garbage").stream_pks == set()  # wakes everyone


class _Recording(_Hub):
    def __init__(self) -> None:
        super().__init__()
        self.woken: list[Any] = []

    def wake(self, pks: Any, _sent_at: float | None = None) -> None:
        self.woken.append(pks)


async def test_a_database_skips_its_own_notifications(postgres_database: str) -> None:
    """Its readers were woken at COMMIT: its own NOTIFY would wake them (and read) twice.
    Another `Database` in the same process is another origin: its notifications wake."""
    hub = _Recording()
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

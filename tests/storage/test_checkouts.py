"""Connections are handed out in the order they were asked for (`transactions.Checkouts`).

SQLAlchemy's async pool lets a caller that arrives while a woken waiter has not yet run take
the connection, and the waiter queues again at the back: under load some callers then waited
the pool's whole 30 s and failed `database_unavailable` while later ones passed (the chaos
run, on a loaded CI machine). These tests hold the order on both databases, with callers
that read back to back as a busy service's do, and the gate's own rules.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Connection

from app.errors import StorageUnavailable
from app.settings import Settings
from app.storage.database import Database
from app.storage.transactions import Checkouts


def _select_one(conn: Connection) -> int:
    value: int = conn.execute(text("SELECT 1")).scalar_one()
    return value


async def test_a_caller_that_asks_again_goes_behind_the_one_waiting() -> None:
    gate, order = Checkouts(1), []

    async def waiter() -> None:
        async with gate.slot():
            order.append("waiter")

    async with gate.slot():
        waiting = asyncio.create_task(waiter())
        await asyncio.sleep(0)  # it waits for the one slot
    # Released: the waiter is woken but has not run; asking again at once must not pass it.
    async with gate.slot():
        order.append("again")
    await waiting
    assert order == ["waiter", "again"]


async def test_no_slot_within_the_timeout_is_unavailable_and_a_cancelled_wait_takes_none() -> None:
    gate = Checkouts(1, timeout=0.05)
    async with gate.slot():
        with pytest.raises(StorageUnavailable, match=r"within 0\.05 s"):
            async with gate.slot():
                raise AssertionError("never entered")
        cancelled = asyncio.create_task(gate.slot().__aenter__())
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
    async with asyncio.timeout(1), gate.slot():  # the slot came back, and only one was taken
        assert gate._slots.locked()


async def test_no_read_is_overtaken_by_more_than_the_callers_ahead_of_it(
    settings: Settings,
) -> None:
    """Many callers read back to back with some work of their own between reads (a busy
    event loop, as under load); now and then one more read asks. Served in turn, it is
    overtaken only by the callers already waiting (one read each) and the reads already
    granted: never by more than callers + connections, as long as every checkout costs the
    same (kept connections: an overflow connection opened at checkout would put that read
    behind by a few more). The pool's own queue lets callers that ask again take
    connections from woken waiters, again and again; the checkouts' turns do not."""
    database = Database(settings)
    capacity = database._engines.checkouts.capacity
    callers = 4 * capacity
    started = itertools.count()
    stop = asyncio.Event()

    def work(conn: Connection) -> int:
        _select_one(conn)
        return next(started)

    async def busy() -> None:
        while not stop.is_set():
            await database.read(work)
            sum(range(20_000))  # its own work, on the event loop
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(busy()) for _ in range(callers)]
    try:
        await asyncio.sleep(0.2)
        overtaken = []
        for _ in range(30):
            asked = next(started)
            async with asyncio.timeout(20):
                overtaken.append(await database.read(work) - asked - 1)
            await asyncio.sleep(0.005)
        assert max(overtaken) <= callers + capacity, (sorted(overtaken), callers, capacity)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await database.close()


async def test_steady_concurrent_reads_keep_their_connections(settings: Settings) -> None:
    """Three times as many reads at once as there are connections, round after round: once
    each connection is open, none is opened again (an overflow connection is closed at
    check-in, so a pool with overflow opened one per checkout now and then, and that read
    ran behind the rest)."""
    database = Database(settings)
    capacity = database._engines.checkouts.capacity
    opened: list[object] = []
    event.listen(database._engines.base.sync_engine, "connect", lambda conn, _: opened.append(conn))

    async def reads(n: int) -> None:
        await asyncio.gather(*(database.read(_select_one) for _ in range(n)))

    try:
        await reads(3 * capacity)  # the connections are opened, at most one per slot
        warm = len(opened)
        assert 0 < warm <= capacity
        for _ in range(20):
            await reads(3 * capacity)
        assert len(opened) == warm, "connections were opened again under steady reads"
    finally:
        await database.close()


async def test_an_in_memory_database_serves_its_one_connection_in_turn() -> None:
    """`sqlite+aiosqlite:///:memory:` is one connection's database (StaticPool): many reads
    at once all pass, one at a time."""
    database = Database(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    try:
        assert database._engines.checkouts.capacity == 1
        answers = await asyncio.gather(*(database.read(_select_one) for _ in range(20)))
        assert answers == [1] * 20
    finally:
        await database.close()

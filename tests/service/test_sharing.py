"""The fan-out's shared reads: the readers of a stream woken together make one database read,
and never one that may predate what they were woken for.

(The load test that needs this: `test_live_load.py`, a thousand readers of one generation;
before reads were shared, every reader read on every wake-up and exhausted PostgreSQL's
pool.)
"""

from __future__ import annotations

import asyncio

import pytest

from app.service.fanout import Fanout
from app.service.observer import Observer


class CountedRead:
    """A read that waits until released, and counts how often it started."""

    def __init__(self) -> None:
        self.started = 0
        self.release = asyncio.Event()

    async def __call__(self) -> int:
        self.started += 1
        answer = self.started
        await self.release.wait()
        return answer


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_identical_reads_in_flight_are_one_read() -> None:
    hub = Fanout((), Observer(), max_readers=1)
    read = CountedRead()
    readers = [asyncio.create_task(hub.read_shared(7, "page", read)) for _ in range(1_000)]
    await settle()
    read.release.set()
    assert await asyncio.gather(*readers) == [1] * 1_000
    assert read.started == 1


async def test_other_questions_and_other_streams_are_read_apart() -> None:
    hub = Fanout((), Observer(), max_readers=1)
    read = CountedRead()
    asked = [hub.read_shared(7, "page", read), hub.read_shared(7, "current", read)]
    asked.append(hub.read_shared(8, "page", read))
    tasks = [asyncio.create_task(a) for a in asked]
    await settle()
    read.release.set()
    assert sorted(await asyncio.gather(*tasks)) == [1, 2, 3]


@pytest.mark.parametrize("woken", [[7], None])
async def test_a_wake_up_retires_the_read_in_flight(woken: list[int] | None) -> None:
    """A reader woken after a read began must not take its (maybe older) snapshot."""
    hub = Fanout((), Observer(), max_readers=1)
    read = CountedRead()
    before = asyncio.create_task(hub.read_shared(7, "page", read))
    await settle()
    hub.wake(woken)
    after = asyncio.create_task(hub.read_shared(7, "page", read))
    await settle()
    read.release.set()
    assert (await before, await after) == (1, 2)


async def test_a_wake_up_of_another_stream_does_not() -> None:
    hub = Fanout((), Observer(), max_readers=1)
    read = CountedRead()
    before = asyncio.create_task(hub.read_shared(7, "page", read))
    await settle()
    hub.wake([8])
    after = asyncio.create_task(hub.read_shared(7, "page", read))
    await settle()
    read.release.set()
    assert (await before, await after) == (1, 1)


async def test_a_reader_that_goes_away_does_not_cancel_the_others_read() -> None:
    hub = Fanout((), Observer(), max_readers=1)
    read = CountedRead()
    leaving = asyncio.create_task(hub.read_shared(7, "page", read))
    staying = asyncio.create_task(hub.read_shared(7, "page", read))
    await settle()
    leaving.cancel()
    await settle()
    read.release.set()
    assert await staying == 1
    assert leaving.cancelled()


async def test_a_failed_read_fails_every_reader_that_shared_it() -> None:
    hub = Fanout((), Observer(), max_readers=1)

    async def broken() -> int:
        await asyncio.sleep(0)
        raise OSError("the database went away")

    readers = [asyncio.create_task(hub.read_shared(7, "page", broken)) for _ in range(3)]
    results = await asyncio.gather(*readers, return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
    # and the next read is a new one
    read = CountedRead()
    read.release.set()
    assert await hub.read_shared(7, "page", read) == 1

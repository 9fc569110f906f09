"""What the live readers share: the readers of a stream woken together make one database
read, and never one that may predate what they were woken for; readers given the same page
share its frames and one encoded body.

(The load test that needs shared reads: `test_live_load.py`, a thousand readers of one
generation. What this process appends is handed to its readers: test_live_handoff.py.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from app.domain.decision import Reason
from app.service.frames import EventFrame, Frame, PageFrames, ResetFrame
from app.service.hub import Hub
from app.service.observer import Observer
from app.service.sharing import SharedFrames, SharedReads
from app.storage.records import EventPage, EventRecord


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


def shared_reads() -> tuple[Hub, SharedReads]:
    """Shared reads as the live reads keep them (joined for a while after they are done),
    told of changes by a hub."""
    hub, reads = Hub((), Observer()), SharedReads(kept_for=0.5)
    hub.listen(reads)
    return hub, reads


async def test_identical_reads_in_flight_are_one_read() -> None:
    _hub, reads = shared_reads()
    read = CountedRead()
    readers = [asyncio.create_task(reads.read(7, "page", read)) for _ in range(1_000)]
    await settle()
    read.release.set()
    assert await asyncio.gather(*readers) == [1] * 1_000
    assert read.started == 1


async def test_other_questions_and_other_streams_are_read_apart() -> None:
    _hub, reads = shared_reads()
    read = CountedRead()
    asked = [reads.read(7, "page", read), reads.read(7, "current", read)]
    asked.append(reads.read(8, "page", read))
    tasks = [asyncio.create_task(a) for a in asked]
    await settle()
    read.release.set()
    assert sorted(await asyncio.gather(*tasks)) == [1, 2, 3]


@pytest.mark.parametrize("woken", [[7], None])
async def test_a_wake_up_retires_the_read_in_flight(woken: list[int] | None) -> None:
    """A reader woken after a read began must not take its (maybe older) snapshot."""
    hub, reads = shared_reads()
    read = CountedRead()
    before = asyncio.create_task(reads.read(7, "page", read))
    await settle()
    hub.wake(woken)
    after = asyncio.create_task(reads.read(7, "page", read))
    await settle()
    read.release.set()
    assert (await before, await after) == (1, 2)


async def test_a_wake_up_of_another_stream_does_not() -> None:
    hub, reads = shared_reads()
    read = CountedRead()
    before = asyncio.create_task(reads.read(7, "page", read))
    await settle()
    hub.wake([8])
    after = asyncio.create_task(reads.read(7, "page", read))
    await settle()
    read.release.set()
    assert (await before, await after) == (1, 1)


async def test_a_reader_that_goes_away_does_not_cancel_the_others_read() -> None:
    _hub, reads = shared_reads()
    read = CountedRead()
    leaving = asyncio.create_task(reads.read(7, "page", read))
    staying = asyncio.create_task(reads.read(7, "page", read))
    await settle()
    leaving.cancel()
    await settle()
    read.release.set()
    assert await staying == 1
    assert leaving.cancelled()


async def test_a_failed_read_fails_every_reader_that_shared_it() -> None:
    _hub, reads = shared_reads()

    async def broken() -> int:
        await asyncio.sleep(0)
        raise OSError("the database went away")

    readers = [asyncio.create_task(reads.read(7, "page", broken)) for _ in range(3)]
    results = await asyncio.gather(*readers, return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
    # and the next read is a new one
    read = CountedRead()
    read.release.set()
    assert await reads.read(7, "page", read) == 1


class CountedEncode:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, batch: Sequence[Frame]) -> bytes:
        self.calls += 1
        return repr(list(batch)).encode()


def page_of(*seqs: int) -> EventPage:
    return EventPage(seqs[0] - 1, seqs[-1], tuple(EventRecord(s, None, f"d{s}") for s in seqs))


async def test_readers_given_the_same_page_share_its_frames_and_one_body() -> None:
    shared = SharedFrames()
    encode = CountedEncode()
    page = page_of(1, 2)
    frames = shared.frames_of("tok", page)
    assert isinstance(frames, PageFrames)
    assert list(frames) == [EventFrame("tok", 1, None, "d1"), EventFrame("tok", 2, None, "d2")]
    assert shared.frames_of("tok", page) is frames
    bodies = [shared.encoded(shared.frames_of("tok", page), encode) for _ in range(100)]
    assert encode.calls == 1
    assert all(body is bodies[0] for body in bodies)
    # An equal page that is another object (another read) is made anew.
    assert shared.frames_of("tok", page_of(1, 2)) is not frames


def test_a_batch_of_a_readers_own_is_encoded_for_it_alone() -> None:
    sharing = SharedFrames()
    encode, other = CountedEncode(), CountedEncode()
    own: list[Frame] = [ResetFrame(Reason.SUPERSEDED, None)]
    sharing.encoded(own, encode)
    sharing.encoded(own, encode)
    assert encode.calls == 2
    shared = sharing.frames_of("tok", page_of(3))
    sharing.encoded(shared, encode)
    sharing.encoded(shared, other)  # another renderer's bytes are its own
    assert (encode.calls, other.calls) == (3, 1)

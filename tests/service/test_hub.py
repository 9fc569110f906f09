"""The fan-out's interface: reader slots and their cap, watches, and what a crowd of
readers shares — a page's frames and their encoded body, made once for all of them.

(Shared reads: tests/reliability/test_live_shared_reads.py; handed-over appends and the
crowd delay: test_live_handoff.py.)
"""

from __future__ import annotations

from collections.abc import Sequence

from app.domain.decision import Reason
from app.service.fanout import Fanout
from app.service.frames import EventFrame, Frame, PageFrames, ResetFrame
from app.service.observer import Observer
from app.storage.records import EventPage, EventRecord


class Gauge(Observer):
    def __init__(self) -> None:
        self.readers: list[int] = []

    def live_readers(self, count: int) -> None:
        self.readers.append(count)


class CountedEncode:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, batch: Sequence[Frame]) -> bytes:
        self.calls += 1
        return repr(list(batch)).encode()


def page_of(*seqs: int) -> EventPage:
    return EventPage(seqs[0] - 1, seqs[-1], tuple(EventRecord(s, None, f"d{s}") for s in seqs))


def test_slots_are_capped_know_their_tenant_and_are_given_back_once() -> None:
    gauge = Gauge()
    fanout = Fanout((), gauge, max_readers=2)
    first, second = fanout.take_slot("t1"), fanout.take_slot("t2")
    assert first is not None
    assert second is not None
    assert (first.tenant, second.tenant) == ("t1", "t2")
    assert not fanout.has_room("t1")
    assert fanout.take_slot("t1") is None
    first.release()
    first.release()  # idempotent: one place back, not two
    assert fanout.readers == 1
    assert fanout.has_room("t3")
    assert gauge.readers == [1, 2, 1]


async def test_a_watch_is_rung_only_while_its_block_runs() -> None:
    fanout = Fanout((), Observer(), max_readers=1)
    with fanout.watch(7) as watch:
        assert list(fanout.watched()) == [7]
        watch.arm()
        fanout.wake([8])
        assert not await watch.wait(0)
        fanout.wake([7])
        assert await watch.wait(0)
    assert list(fanout.watched()) == []
    watch.arm()
    fanout.wake(None)
    assert not await watch.wait(0)


async def test_readers_given_the_same_page_share_its_frames_and_one_body() -> None:
    fanout = Fanout((), Observer(), max_readers=1)
    encode = CountedEncode()
    page = page_of(1, 2)
    frames = fanout.frames_of("tok", page)
    assert isinstance(frames, PageFrames)
    assert list(frames) == [EventFrame("tok", 1, None, "d1"), EventFrame("tok", 2, None, "d2")]
    assert fanout.frames_of("tok", page) is frames
    bodies = [fanout.encoded(fanout.frames_of("tok", page), encode) for _ in range(100)]
    assert encode.calls == 1
    assert all(body is bodies[0] for body in bodies)
    # An equal page that is another object (another read) is made anew.
    assert fanout.frames_of("tok", page_of(1, 2)) is not frames


def test_a_batch_of_a_readers_own_is_encoded_for_it_alone() -> None:
    fanout = Fanout((), Observer(), max_readers=1)
    encode, other = CountedEncode(), CountedEncode()
    own: list[Frame] = [ResetFrame(Reason.SUPERSEDED, None)]
    fanout.encoded(own, encode)
    fanout.encoded(own, encode)
    assert encode.calls == 2
    shared = fanout.frames_of("tok", page_of(3))
    fanout.encoded(shared, encode)
    fanout.encoded(shared, other)  # another renderer's bytes are its own
    assert (encode.calls, other.calls) == (3, 1)

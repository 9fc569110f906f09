"""Live reads under load, on a real server process, on SQLite and PostgreSQL.

- A thousand concurrent readers of one generation: every one receives every event, in
  order and exactly once, and the server's memory stays under a bound per reader.
- A reader that stops reading (a socket never read from) does not hold appends back, and
  the server keeps at most about a page for it; once it reads again it gets everything.

Readers are raw asyncio connections with a small SSE parser (`tests/support/live_readers.py`)
so that a thousand of them are cheap for the test process; the parser itself is checked
here against the service's own renderer. Every wait has a deadline; nothing is slept for.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from app.api.routes.live import render
from app.domain.decision import Reason
from app.service.frames import EndFrame, EventFrame, Frame, Heartbeat, ResetFrame
from tests.support.live_readers import (
    WAIT,
    LiveReader,
    SseParser,
    metric,
    metric_reaches,
    stalled_socket,
)
from tests.support.process_memory import MIB, RssSampler, rss
from tests.support.processes import ServerProcess
from tests.support.writer_calls import append_data, open_token

pytestmark = pytest.mark.process

READERS = 1_000
EVENTS = 50  # appended while the readers follow, one per append
EVENT_BYTES = 4_096
# The bound on the server's growth per reader. A reader costs the service its socket and
# uvicorn's protocol object, three tasks (the request, its writer and its disconnect
# listener), the generator of its frames with its watch: about 40 KiB was measured, on
# PostgreSQL and SQLite alike. Pages are not per reader: readers at the same position
# share one read, so a wake-up holds one page for all of them. 128 KiB leaves three times
# the measure for the allocator on a busy machine, and is less than one reader's share of
# what was appended (EVENTS x EVENT_BYTES = 200 KiB): a service that kept what it
# delivered, queued events per reader, or held a page per reader (+200 KiB each when
# every reader read for itself) crosses it.
PER_READER_BOUND = 128 * 1024
GAUGE = "eventlog_live_readers"


@pytest.fixture
async def service(database_url: str, tmp_path: Path) -> AsyncIterator[ServerProcess]:
    """A server process on the test's database, quiet, with room for the readers."""
    server = ServerProcess(
        database_url,
        log_path=tmp_path / "server.log",
        env={
            "EVENTLOG_LOG_LEVEL": "warning",
            "EVENTLOG_LIVE_MAX_READERS": str(READERS + 100),
            "EVENTLOG_RETENTION_INTERVAL_SECONDS": "0",
        },
    )
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


def has(count: int) -> Callable[[LiveReader], bool]:
    return lambda reader: len(reader.events) >= count or reader.ended


def in_order(reader: LiveReader, token: str, count: int) -> bool:
    """Exactly the ids `<token>:1..count`, no control event, nothing else."""
    return [e.id for e in reader.events] == [f"{token}:{seq}" for seq in range(1, count + 1)]


# -- the reader's parser ----------------------------------------------------------------


def random_frames(rng: random.Random, count: int) -> list[Frame]:
    pieces = ["a", "é", "日本", "\n", "\r\n", "\r", " ", ":", "data: x", "", "🙂", "id: 1"]
    frames: list[Frame] = []
    for seq in range(1, count + 1):
        roll = rng.random()
        if roll < 0.1:
            frames.append(Heartbeat())
        elif roll < 0.15:
            frames.append(ResetFrame(Reason.SUPERSEDED, rng.choice([None, "Tok_en-2"])))
        else:
            data = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
            kind = rng.choice([None, "message", "progress"])
            frames.append(EventFrame("Tok_en-1", seq, kind, data))
    frames.append(EndFrame("Tok_en-1", count))
    return frames


@pytest.mark.parametrize("seed", range(20))
def test_the_readers_parser_reads_what_the_service_renders(seed: int) -> None:
    """The service's own `render`, cut at random bytes (inside CRLFs and characters too)."""
    rng = random.Random(seed)
    frames = random_frames(rng, 60)
    body = ("retry: 250\n" + "".join(render(frame) for frame in frames)).encode()
    cuts = sorted(rng.sample(range(1, len(body)), 40))
    parser = SseParser()
    parsed = []
    for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True):
        parsed += parser.feed(body[start:end])
    expected = []
    for frame in frames:
        if isinstance(frame, EventFrame):
            data = frame.data.replace("\r\n", "\n").replace("\r", "\n")
            expected.append((f"{frame.token}:{frame.seq}", frame.event or "message", data))
        elif isinstance(frame, ResetFrame | EndFrame):
            expected.append((None, "reset" if isinstance(frame, ResetFrame) else "end", None))
    got = [(e.id, e.event, None if e.id is None else e.data) for e in parsed]
    assert got == expected
    assert parser.retry == 250
    assert parser.comments == sum(isinstance(f, Heartbeat) for f in frames)


# -- a thousand readers of one generation -------------------------------------------------


async def connect(base_url: str, stream: str, count: int, first: int) -> list[LiveReader]:
    """`count` readers, a hundred at a time, each seen to receive the first `first` events."""
    readers: list[LiveReader] = []
    for start in range(0, count, 100):
        wave = [LiveReader(base_url, stream).start() for _ in range(min(100, count - start))]
        readers += wave
        await asyncio.gather(*(r.wait_until(has(first), WAIT * 2) for r in wave))
    return readers


async def test_a_thousand_readers_of_one_generation_get_everything_in_bounded_memory(
    service: ServerProcess,
) -> None:
    base = service.base_url
    payload = "x" * (EVENT_BYTES - 8)
    async with httpx.AsyncClient(base_url=base, timeout=WAIT) as http:
        # Warm the process up (imports, pools, caches, allocator arenas) on another stream.
        warm = await open_token(http, "warm-up")
        warmers = await connect(base, "warm-up", 20, 0)
        for n in range(20):
            await append_data(http, warm, f"{n:08d}{payload}")
        await asyncio.gather(*(r.wait_until(has(20)) for r in warmers))
        await asyncio.gather(*(r.stop() for r in warmers))
        await metric_reaches(base, GAUGE, 0)

        token = await open_token(http, "crowd")
        await append_data(http, token, f"{1:08d}{payload}")
        with RssSampler(service.pid) as memory:
            readers = await connect(base, "crowd", READERS, 1)
            assert await metric(base, GAUGE) == READERS
            began = time.monotonic()
            for seq in range(2, EVENTS + 1):
                await append_data(http, token, f"{seq:08d}{payload}")
            appended = time.monotonic() - began
            await asyncio.gather(*(r.wait_until(has(EVENTS), WAIT * 4) for r in readers))
            delivered = time.monotonic() - began
        late = [r for r in readers if not in_order(r, token, EVENTS)]
        growth = memory.growth
        print(
            f"{READERS} readers: {EVENTS - 1} appends in {appended:.1f}s, all delivered in "
            f"{delivered:.1f}s; server RSS {memory.baseline / MIB:.0f} → peak "
            f"{memory.peak / MIB:.0f} MiB (+{growth / READERS / 1024:.0f} KiB per reader)"
        )
        assert late == [], f"{len(late)} readers did not get ids 1..{EVENTS} exactly once"
        assert all(r.errors == [] and r.refusals == [] and not r.ended for r in readers)
        assert growth <= READERS * PER_READER_BOUND, f"+{growth / MIB:.0f} MiB"
        assert all(e.data == f"{e.seq:08d}{payload}" for e in readers[-1].events)

        await asyncio.gather(*(r.stop() for r in readers))
        await metric_reaches(base, GAUGE, 0)  # every reader's place is freed once it goes


# -- a reader that stops reading ------------------------------------------------------------

BIG = 256 * 1024  # bytes per event: a few of them fill every socket buffer on the way
STALLED_EVENTS = 240  # 60 MiB behind the stalled reader
# What the server may hold for a stalled reader: one page (EVENTLOG_MAX_PAGE_BYTES, 4 MiB by
# default) as records, as SSE text and as bytes in uvicorn's write buffer, with room for
# the allocator: far less than the 60 MiB appended past the reader.
STALLED_BOUND = 32 * MIB


async def test_a_reader_that_stops_reading_holds_back_neither_appends_nor_memory(
    service: ServerProcess,
) -> None:
    base = service.base_url
    big = "y" * (BIG - 8)
    async with httpx.AsyncClient(base_url=base, timeout=WAIT) as http:
        followed = await open_token(http, "stalled-on")
        unfollowed = await open_token(http, "nobody-reads")
        for n in range(8):  # warm up the append path with events this size
            await append_data(http, unfollowed, f"{n:08d}{big}")
        sock = stalled_socket(base, "stalled-on")
        try:
            await metric_reaches(base, GAUGE, 1)
            with RssSampler(service.pid) as memory:
                paces: dict[str, list[float]] = {"followed": [], "unfollowed": []}
                for seq in range(1, STALLED_EVENTS + 1):
                    # Interleaved, so a busy machine slows both alike.
                    for name, token in (("followed", followed), ("unfollowed", unfollowed)):
                        began = time.perf_counter()
                        await append_data(http, token, f"{seq:08d}{big}")
                        paces[name].append(time.perf_counter() - began)
            appended = STALLED_EVENTS * BIG
            p50 = {name: sorted(times)[len(times) // 2] * 1000 for name, times in paces.items()}
            print(
                f"stalled reader: {appended / MIB:.0f} MiB appended past it; append p50 "
                f"{p50['followed']:.1f} ms on its stream, {p50['unfollowed']:.1f} ms on "
                f"another; server RSS +{memory.growth / MIB:.1f} MiB"
            )
            # Every append was answered while the reader read nothing, and at the pace of
            # appends that no one reads (interleaved, so a busy machine slows both alike; a
            # wide margin, as times are the bench's business).
            assert p50["followed"] <= 2 * p50["unfollowed"] + 50
            assert memory.growth <= STALLED_BOUND, f"+{memory.growth / MIB:.0f} MiB"
            assert rss(service.pid) - memory.baseline <= STALLED_BOUND
            # The reader starts reading again: it is fed everything, in order, from the
            # database at its own pace.
            reader = await resumed_reader(sock, base)
            await reader.wait_until(has(STALLED_EVENTS), WAIT * 4)
            assert in_order(reader, followed, STALLED_EVENTS)
            assert all(e.data == f"{e.seq:08d}{big}" for e in reader.events)
            await reader.stop()
        finally:
            sock.close()
        await metric_reaches(base, GAUGE, 0)


async def resumed_reader(sock: socket.socket, base: str) -> LiveReader:
    """A `LiveReader` that takes over the stalled socket's connection where it stands."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * MIB)
    sock.setblocking(False)
    stream, writer = await asyncio.open_connection(sock=sock)
    reader = LiveReader(base, "stalled-on")
    reader.adopt(stream, writer)
    return reader

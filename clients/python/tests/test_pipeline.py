"""`GenerationPipeline` against the real service, as a process, on both databases.

Events get their ids when handed and are stored behind, in order, exactly once: through a
channel the network drops every few frames (a TCP relay cut while frames are in flight),
with the window bounding what runs ahead; a frame the service refuses breaks the pipeline
visibly (nothing is appended after the gap).
"""

from __future__ import annotations

import asyncio

import pytest
from mcp_eventlog_client import EventLogClient, NewEvent, Superseded
from mcp_eventlog_client.pipeline import GenerationPipeline

from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.process


async def _all_events(log: EventLogClient, token: str) -> list[tuple[int, str | None, str]]:
    return [(e.seq, e.event, e.data) async for e in log.events_after(token, 0)]


async def test_handed_events_are_stored_in_order_once_and_batched(base: str) -> None:
    async with EventLogClient(base, append_transport="channel") as log:
        opened = await log.open_generation("pipe.order")
        pipeline = GenerationPipeline(log, opened.token, window=32)
        seqs = [await pipeline.hand([NewEvent(f"e{i}")]) for i in range(1, 301)]
        # A message of several events is one atomic append, never split across frames.
        seqs.append(await pipeline.hand([NewEvent("p1", event="part"), NewEvent("p2")]))
        assert await pipeline.settle(within=30)
        stored = await _all_events(log, opened.token)
    assert seqs == [*range(1, 301), 302]
    assert stored == [
        *[(i, None, f"e{i}") for i in range(1, 301)],
        (301, "part", "p1"),
        (302, None, "p2"),
    ]
    assert pipeline.acked == 302
    # Handed faster than a commit: events waiting behind a frame in flight share the next.
    assert pipeline.frames < 302


async def test_the_window_bounds_what_runs_ahead(base: str) -> None:
    async with EventLogClient(base, append_transport="channel") as log:
        opened = await log.open_generation("pipe.window")
        pipeline = GenerationPipeline(log, opened.token, window=5)
        most = 0
        for i in range(60):
            await pipeline.hand([NewEvent(f"w{i}")])
            most = max(most, pipeline.unacknowledged)
        # A message larger than the window waits for nothing outstanding, and is stored
        # before `hand` returns: the window is never exceeded.
        big = [NewEvent(f"b{i}") for i in range(8)]
        assert await pipeline.hand(big) == 68
        assert pipeline.acked == 68
        stored = await _all_events(log, opened.token)
    assert most <= 5
    assert [data for _, _, data in stored] == [
        *[f"w{i}" for i in range(60)],
        *[f"b{i}" for i in range(8)],
    ]


async def test_a_channel_dropped_every_few_frames_stores_every_event_once_in_order(
    base: str,
) -> None:
    port = int(base.rsplit(":", 1)[1])
    with TcpProxy(port) as proxy:
        async with EventLogClient(proxy.base_url, append_transport="channel") as log:
            opened = await log.open_generation("pipe.flaky")
            pipeline = GenerationPipeline(log, opened.token, window=16, give_up_after=30)
            cuts = 0
            for i in range(1, 401):
                await pipeline.hand([NewEvent(f"f{i}")])
                if i % 25 == 0:
                    # The relay drops the channel with frames in flight (every ~N frames).
                    cuts += await asyncio.to_thread(proxy.cut)
            assert await pipeline.settle(within=60), pipeline.error
            assert log.channel is not None
            resent, reconnects = log.channel.resent, log.channel.reconnects
            stored = await _all_events(log, opened.token)
    assert cuts >= 10
    assert pipeline.error is None
    assert stored == [(i, None, f"f{i}") for i in range(1, 401)]
    # The drops really hit frames in flight, or the channel was set up again (or REST
    # took over while it was down): the flaky path was taken.
    assert reconnects + resent + sum(log.fallbacks.values()) > 0


async def test_a_refused_frame_breaks_the_pipeline_and_nothing_follows_the_gap(
    base: str,
) -> None:
    broken: list[str] = []
    async with EventLogClient(base, append_transport="channel") as log:
        opened = await log.open_generation("pipe.fenced")
        pipeline = GenerationPipeline(
            log, opened.token, window=64, on_broken=lambda _p, error: broken.append(error.code)
        )
        for i in range(1, 11):
            await pipeline.hand([NewEvent(f"a{i}")])
        assert await pipeline.settle(within=30)
        await log.open_generation("pipe.fenced")  # another writer fences this generation
        await pipeline.hand([NewEvent("a11")])  # refused behind the caller
        assert not await pipeline.settle(within=30)
        with pytest.raises(Superseded):  # once broken, hand raises the pipeline's error
            await pipeline.hand([NewEvent("a12")])
        stored = await _all_events(log, opened.token)
    assert broken == ["superseded"]
    assert pipeline.error is not None
    assert pipeline.error.code == "superseded"
    assert [data for _, _, data in stored] == [f"a{i}" for i in range(1, 11)]

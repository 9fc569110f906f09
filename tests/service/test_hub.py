"""The wake-up hub: a watch is rung by changes of its stream while it is watched; a stream
with a crowd of readers is rung after a delay that grows with them, never not at all; the
listeners hear of every change before any reader is rung.

(What the live reads keep per stream and the hub tells of changes: test_sharing.py.)
"""

from __future__ import annotations

import asyncio
import contextlib

from app.service.hub import Hub
from app.service.observer import Observer


async def test_a_watch_is_rung_only_while_its_block_runs() -> None:
    hub = Hub((), Observer())
    with hub.watch(7) as watch:
        assert list(hub.watched()) == [7]
        watch.arm()
        hub.wake([8])
        assert not await watch.wait(0)
        hub.wake([7])
        assert await watch.wait(0)
    assert list(hub.watched()) == []
    watch.arm()
    hub.wake(None)
    assert not await watch.wait(0)


async def test_a_crowded_stream_is_rung_after_a_delay_that_grows_with_it() -> None:
    hub = Hub((), Observer(), fanout_per_reader=0.0005, fanout_max=0.05)
    with hub.watch(7) as alone:  # 0.5 ms for one reader: rung at once
        alone.arm()
        hub.wake([7])
        assert await alone.wait(0)
    with contextlib.ExitStack() as stack:
        crowd = [stack.enter_context(hub.watch(8)) for _ in range(200)]  # 100 ms, capped: 50
        for watch in crowd:
            watch.arm()
        started = asyncio.get_running_loop().time()
        hub.wake([8])
        # Asked at once: after the changes below, a loaded machine may be past the delay.
        assert not any(await asyncio.gather(*(watch.wait(0) for watch in crowd)))
        for _ in range(2):  # changes meanwhile join the wake-up already due
            await asyncio.sleep(0.01)
            hub.wake([8])
        assert all(await asyncio.gather(*(watch.wait(1) for watch in crowd)))
        waited = asyncio.get_running_loop().time() - started
        assert 0.045 <= waited < 0.5

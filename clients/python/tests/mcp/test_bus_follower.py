"""The bus's follower (`mcp_eventlog_client.mcp.bus_follower`): each event handed to the
local listeners once, in order, also across an outage that cuts a follow mid-stream.

A fake service (its `follow` scripted per call) stands in for the real one here, so the
cut falls exactly after an event was delivered; tests/mcp/test_bus.py restarts a real
service under two real replicas."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent
from mcp_eventlog_client import LiveEvent, ServiceUnreachable
from mcp_eventlog_client.mcp.bus_events import EVENT_TYPE, encode
from mcp_eventlog_client.mcp.bus_follower import BusFollower


def _event(seq: int, uri: str) -> LiveEvent:
    return LiveEvent(f"g:{seq}", "g", seq, EVENT_TYPE, encode(ResourceUpdated(uri=uri)))


class _Service:
    """`follow` as the service answers it: the stored events after the position asked
    from, then a wait for more; the first follow is cut (the service went down) right after
    the event of seq `cut_after` was delivered. Records each position asked from."""

    def __init__(self, stored: list[LiveEvent], cut_after: int) -> None:
        self._stored = stored
        self._cut_after: int | None = cut_after
        self.asked: list[str | None] = []

    async def follow(self, _stream: str, position: str, **_: Any) -> AsyncIterator[LiveEvent]:
        self.asked.append(position)
        for event in self._stored[int(position.rpartition(":")[2]) :]:
            yield event
            if event.seq == self._cut_after:
                self._cut_after = None
                raise ServiceUnreachable(0, ServiceUnreachable.code, "connection refused")
        await anyio.sleep_forever()


@dataclass
class _Source:
    client: _Service
    stream_id: str = "mcp-bus.test"
    lagged: int = 0
    missed: int = 0
    delivered: int = 0
    undecodable: int = 0
    listener_errors: int = 0
    failures: Counter[str] = field(default_factory=Counter)


@dataclass
class _Generation:
    token: str = "g"
    tail_seq: int = 0


class _Generations:
    async def newest(self) -> _Generation:
        return _Generation()


async def test_a_follow_cut_by_an_outage_goes_on_after_the_last_event_delivered() -> None:
    service = _Service([_event(1, "before"), _event(2, "after")], cut_after=1)
    follower = BusFollower(_Source(service), _Generations())  # type: ignore[arg-type]
    seen: list[ServerEvent] = []
    follower.subscribe(seen.append)
    with anyio.move_on_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(follower.follow_forever)
            while len(service.asked) < 2 or len(seen) < 2:  # noqa: ASYNC110 (its task delivers)
                await anyio.sleep(0.01)
            await anyio.sleep(0.1)  # anything delivered twice would be by now
            group.cancel_scope.cancel()
    assert [e.uri for e in seen if isinstance(e, ResourceUpdated)] == ["before", "after"]
    assert service.asked == ["g:0", "g:1"]
    assert follower.position == "g:2"

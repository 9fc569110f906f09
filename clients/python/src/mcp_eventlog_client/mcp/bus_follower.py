"""The following half of `EventLogSubscriptionBus`: the bus stream followed live from its
tail, each event handed to this replica's listeners once, in the stream's order."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import aclosing

import anyio
from mcp.shared.subscriptions import ServerEvent

from mcp_eventlog_client import (
    EventLogError,
    LiveEnd,
    LiveEvent,
    LiveReset,
    RetryPolicy,
    ServiceUnreachable,
)
from mcp_eventlog_client.mcp.bus_events import EVENT_TYPE, decode
from mcp_eventlog_client.mcp.bus_generations import BusGenerations, BusSource

log = logging.getLogger("mcp_eventlog_client.mcp.bus")

Listener = Callable[[ServerEvent], None]
# The follower's own reconnections: a few quick ones inside `follow`, then this loop's.
_FOLLOW_RETRY = RetryPolicy(attempts=3, base_delay=0.05, max_delay=0.5)
_MAX_BACKOFF = 5.0
# Resets after which the service, asked from where the follower is, delivers the next
# generation opened from seq 1: the followed one is finished or purged, and publishers
# open anew.
_ENDED = frozenset({"terminal", "expired"})


class BusFollower:
    """Follows the bus stream and delivers to the local listeners (see
    `mcp_eventlog_client.mcp.bus`)."""

    def __init__(self, source: BusSource, generations: BusGenerations) -> None:
        self.source = source
        self._generations = generations
        self._listeners: dict[object, Listener] = {}
        self.following = anyio.Event()
        """Set once the follower has taken its place at the tail."""
        self.position: str | None = None
        """The id of the last event delivered (None: not placed yet, or to rejoin at the
        tail). Kept as each event is delivered, so a follow cut by an outage goes on after
        the last event delivered, not from where that follow began."""

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Register `listener` on this replica; returns an idempotent unsubscribe."""
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    async def follow_forever(self) -> None:
        """Follow the bus stream from its tail until cancelled."""
        stream_id = self.source.stream_id
        backoff = 0.1
        self.position = None
        while True:
            try:
                if self.position is None:
                    self.position = await self._tail()
                    self.following.set()
                self.position = await self.follow(self.position)
                backoff = 0.1
            except (ServiceUnreachable, TimeoutError) as error:
                log.warning("bus %s: the service is unreachable (%s); retrying", stream_id, error)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            except EventLogError as error:
                # The service refused our place (a database wiped, a 5xx): start over at
                # the tail, counted as a lag.
                log.warning(
                    "bus %s: following was refused (%s); rejoining at the tail", stream_id, error
                )
                self.source.lagged += 1
                self.position = None
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)

    async def _tail(self) -> str:
        """Where a follower (re)joins: after the last event of the stream's current
        generation, live or not (a finished one answers `reset`, then the next one opened).
        A generation is opened here only when the stream has none at all."""
        current = await self._generations.newest()
        if current is None:
            await self._generations.live()
            current = await self._generations.newest()
        assert current is not None
        return f"{current.token}:{current.tail_seq}"

    async def follow(self, position: str) -> str | None:
        """Deliver events from `position` until the follower must rejoin; the new place
        (None: at the tail)."""
        follow = self.source.client.follow(self.source.stream_id, position, retry=_FOLLOW_RETRY)
        async with aclosing(follow) as items:
            async for item in items:
                if isinstance(item, LiveEvent):
                    self._deliver(item)
                    position = self.position = item.id
                elif isinstance(item, LiveReset):
                    if item.reason == "superseded" and item.generation is not None:
                        continue  # the new generation follows from seq 1: nothing is lost
                    if item.generation is None and item.reason in _ENDED:
                        continue  # the service delivers the next one opened, from seq 1
                    await self._lag(position, item.reason)
                    return None
                elif isinstance(item, LiveEnd):
                    return None  # finished (an operator?): rejoin at its end, and wait
        return position

    async def _lag(self, position: str, reason: str) -> None:
        """Count the events a jump to the tail skips."""
        self.source.lagged += 1
        token, _, seq = position.rpartition(":")
        current = await self._generations.current()
        skipped = current.tail_seq - int(seq) if current and current.token == token else 0
        self.source.missed += max(skipped, 0)
        log.warning(
            "bus %s: the follower fell behind (%s); %d events skipped, rejoining at the tail",
            self.source.stream_id,
            reason,
            skipped,
        )

    def _deliver(self, item: LiveEvent) -> None:
        event = decode(item.data) if item.event == EVENT_TYPE else None
        if event is None:
            self.source.undecodable += 1
            log.warning(
                "bus %s: event %s is not a server event; skipped", self.source.stream_id, item.id
            )
            return
        self.source.delivered += 1
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:  # the fan-out boundary: one listener never stops the others
                self.source.listener_errors += 1
                log.exception("a bus listener raised; continuing")

"""The generation a bus (`EventLogSubscriptionBus`) appends to and follows: the bus
stream's current one, opened only when none is live."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Protocol

import anyio

from mcp_eventlog_client import EventLogClient, Generation, UnknownStream

log = logging.getLogger("mcp_eventlog_client.mcp.bus")


class BusSource(Protocol):
    """What the parts of a bus read of it, at each use (the service, the stream, the
    options the bus was given), and the bus's counters, which they keep."""

    client: EventLogClient
    stream_id: str
    max_events: int
    publish_timeout: float
    outage_seconds: float
    producer: str
    failures: Counter[str]
    published: int
    delivered: int
    lagged: int
    missed: int
    undecodable: int
    listener_errors: int


class BusGenerations:
    """The bus stream's current generation, remembered once found.

    One look-up (or opening) at a time: publishes racing on a fresh bus would otherwise
    each open a generation and supersede one another.
    """

    def __init__(self, source: BusSource) -> None:
        self.source = source
        self.token: str | None = None
        self._finding = anyio.Lock()

    async def live(self) -> str:
        """The stream's current generation when it is live, else a new one."""
        async with self._finding:
            if self.token is not None:
                return self.token
            current = await self.current()
            if current is None:
                source = self.source
                current = await source.client.open_generation(
                    source.stream_id, producer=source.producer, max_events=source.max_events
                )
                log.info("opened bus generation %s of %s", current.token, source.stream_id)
            self.token = current.token
            return current.token

    def fenced(self, token: str) -> None:
        """`token` refused an append: the next one looks the current generation up again."""
        if self.token == token:
            self.token = None

    async def newest(self) -> Generation | None:
        """The stream's current generation, whatever its state (None: it has none)."""
        try:
            return (await self.source.client.stream(self.source.stream_id)).current
        except UnknownStream:
            return None

    async def current(self) -> Generation | None:
        """The stream's current generation while it can take appends."""
        current = await self.newest()
        if current is None or current.terminal or current.expired:
            return None
        return current

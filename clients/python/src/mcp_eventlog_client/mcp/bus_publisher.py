"""The publishing half of `EventLogSubscriptionBus`: a queue of publishes, one append in
flight per bus carrying every event queued meanwhile, and failures counted, never raised."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

import anyio
from mcp.shared.subscriptions import ServerEvent

from mcp_eventlog_client import (
    DeadlineExceeded,
    EventLogError,
    Expired,
    NewEvent,
    Superseded,
    TerminalGeneration,
    UnknownGeneration,
)
from mcp_eventlog_client.mcp.bus_events import EVENT_TYPE, encode
from mcp_eventlog_client.mcp.bus_generations import BusGenerations, BusSource

log = logging.getLogger("mcp_eventlog_client.mcp.bus")

_FENCED = (Superseded, TerminalGeneration, Expired, UnknownGeneration)
_MAX_BATCH = 500  # under the service's EVENTLOG_MAX_BATCH_EVENTS (1,000 by default)


@dataclass(slots=True)
class _Entry:
    """One publish waiting for its append."""

    data: str
    done: anyio.Event = field(default_factory=anyio.Event)
    error: EventLogError | None = None
    abandoned: bool = False


class BusPublisher:
    """Stores published events on the bus stream (see `mcp_eventlog_client.mcp.bus`)."""

    def __init__(self, source: BusSource, generations: BusGenerations) -> None:
        self.source = source
        self._generations = generations
        self._queue: deque[_Entry] = deque()
        self._in_flight: anyio.Event | None = None
        self._outage_until = 0.0

    async def publish(self, event: ServerEvent) -> None:
        """Store `event`; a failure is logged and counted in `failures`."""
        if anyio.current_time() < self._outage_until:
            self._failed("outage", "the service was just found down")
            return
        entry = _Entry(encode(event))
        self._queue.append(entry)
        timeout = self.source.publish_timeout
        try:
            with anyio.fail_after(timeout):
                await self._sent(entry)
        except TimeoutError:
            entry.abandoned = True  # if not sent yet, it never will be
            self._outage_until = anyio.current_time() + self.source.outage_seconds
            self._failed("timeout", f"not stored within {timeout:g} s")
            return
        if entry.error is not None:
            if entry.error.status == 0 or entry.error.status >= 500:
                self._outage_until = anyio.current_time() + self.source.outage_seconds
            self._failed(entry.error.code, entry.error.detail)
            return
        self.source.published += 1

    async def _sent(self, entry: _Entry) -> None:
        """Wait until `entry` was appended (or failed), flushing the queue when no one is.

        One append in flight per bus, carrying every event queued meanwhile: many
        publishers of one replica share a round trip, and the appends of one generation
        (one row the service updates per append) do not queue up behind each other.
        """
        while not entry.done.is_set():
            if self._in_flight is None:
                await self._flush()
            else:
                await self._in_flight.wait()

    async def _flush(self) -> None:
        """Append the events at the head of the queue (at most `_MAX_BATCH`), in order."""
        self._in_flight = flushed = anyio.Event()
        batch: list[_Entry] = []
        error: EventLogError | None = None
        try:
            while self._queue and len(batch) < _MAX_BATCH:
                entry = self._queue.popleft()
                if not entry.abandoned:
                    batch.append(entry)
            # Shielded and bounded on its own: the publishers waiting on this batch must
            # hear its outcome even when the one flushing it gives up waiting.
            with anyio.CancelScope(shield=True):
                try:
                    with anyio.fail_after(self.source.publish_timeout):
                        if batch:
                            await self._append([entry.data for entry in batch])
                except TimeoutError:
                    error = DeadlineExceeded(0, DeadlineExceeded.code, "the append timed out")
                except EventLogError as refused:
                    error = refused
        finally:
            for entry in batch:
                entry.error = error
                entry.done.set()
            self._in_flight = None
            flushed.set()

    async def _append(self, data: list[str]) -> None:
        events = [NewEvent(one, event=EVENT_TYPE) for one in data]
        for _ in range(3):
            generation = self._generations.token or await self._generations.live()
            try:
                # No first_seq: many publishers share the generation, so the service
                # numbers the events; never retried (a retry could store an event twice).
                await self.source.client.append(generation, events)
                return
            except _FENCED as fenced:
                log.info("bus generation %s refused an append (%s)", generation, fenced.code)
                self._generations.fenced(generation)
        raise EventLogError(409, "fenced", "the bus generation kept changing under the append")

    def _failed(self, cause: str, detail: str) -> None:
        self.source.failures[cause] += 1
        log.error(
            "could not publish to bus %s (%s: %s); the event is lost",
            self.source.stream_id,
            cause,
            detail,
        )

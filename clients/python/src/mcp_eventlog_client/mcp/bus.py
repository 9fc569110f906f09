"""`EventLogSubscriptionBus`: the SDK's `SubscriptionBus`, across replicas, through the service.

The MCP Python SDK (2.3.0) fans 2026-07-28 server events (`ResourceUpdated`,
`ToolsListChanged`, …) out to `subscriptions/listen` streams through a `SubscriptionBus`;
its own is in-process. This one is backed by the event-log service, so a tool on replica A
reaches a client listening on replica B:

    bus = EventLogSubscriptionBus("http://127.0.0.1:8080")
    server = MCPServer("docs", subscriptions=bus)
    app = bus.asgi_app(server.streamable_http_app())  # follows the bus while it serves

- `publish` appends the event to the bus stream (`mcp-bus.<name>`, see
  `mcp_eventlog_client.mcp.bus_events`) and returns once it is stored: it never raises
  for the service. One append is in flight per bus; publishes made meanwhile go out
  together in the next one, in order (the service's appends to one generation are
  serialised on its row, so one append per event would queue up under load).
  The SDK's contract is fire-and-forget (its own bus never fails a publisher, and a
  dropped listen stream loses events by design), and a tool that changed a resource has
  done its work whether or not the notification got out; raising would turn that success
  into an error. A publish that could not be stored (the service unreachable, slower than
  `publish_timeout`, refusing) is logged and counted in `failures` by cause; after a
  failure that says the service is down, publishes fail fast for `outage_seconds`.
- Every replica follows the bus stream live (`EventLogClient.follow`) and hands each
  event to its local listeners, in the stream's order, once: its own publishes come back
  the same way, so every replica sees one order. A replica that starts (or restarts)
  starts at the stream's tail: no replay, as the SDK's contract says.
- One generation at a time: the first publisher that finds no live current generation
  opens one, with `max_events` retention. Openers racing each other do not fence each
  other into a loop: a publisher whose append is refused (`superseded`, `terminal`,
  `expired`, `unknown_generation`) re-reads the stream's current generation and appends
  there, and opens one only when none is live. A follower opens one only when the stream
  has none at all: one it opened could fence a generation a publisher has just appended
  to. Following a finished (or purged) generation, it waits on the same connection for
  the next one, which the service delivers from seq 1.
- A follower that falls behind the retention (its next event was evicted) or whose
  position is refused jumps to the tail: the events it skipped are counted in `missed`
  (and `lagged` counts the jumps) and logged. While the service is unreachable the
  follower retries with backoff and goes on exactly where it was.
- Listeners are called on the follower's task, on the server's loop; one that raises is
  logged, counted in `listener_errors`, and never stops the others or the follower.

The follower runs while `asgi_app(app)` serves (its lifespan), or inside
`async with bus:` for a host that is not an ASGI app.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import Counter, deque
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

import anyio
import anyio.abc
from mcp.shared.subscriptions import ServerEvent
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_eventlog_client import (
    DeadlineExceeded,
    EventLogClient,
    EventLogError,
    Expired,
    Generation,
    LiveEnd,
    LiveEvent,
    LiveReset,
    NewEvent,
    RetryPolicy,
    ServiceUnreachable,
    Superseded,
    TerminalGeneration,
    UnknownGeneration,
    UnknownStream,
)
from mcp_eventlog_client.mcp.bus_events import DEFAULT_NAME, EVENT_TYPE, bus_stream, decode, encode

log = logging.getLogger(__name__)

Listener = Callable[[ServerEvent], None]
_FENCED = (Superseded, TerminalGeneration, Expired, UnknownGeneration)
# The follower's own reconnections: a few quick ones inside `follow`, then this loop's.
_FOLLOW_RETRY = RetryPolicy(attempts=3, base_delay=0.05, max_delay=0.5)
_MAX_BACKOFF = 5.0
_STARTUP_WAIT = 5.0
_MAX_BATCH = 500  # under the service's EVENTLOG_MAX_BATCH_EVENTS (1,000 by default)


@dataclass(slots=True)
class _Entry:
    """One publish waiting for its append."""

    data: str
    done: anyio.Event = field(default_factory=anyio.Event)
    error: EventLogError | None = None
    abandoned: bool = False


# Resets after which the service, asked from where the follower is, delivers the next
# generation opened from seq 1: the followed one is finished or purged, and publishers
# open anew.
_ENDED = frozenset({"terminal", "expired"})


class EventLogSubscriptionBus:
    """A `mcp.server.subscriptions.SubscriptionBus` backed by the event-log service (see
    the module).

    Pass `client` to share an `EventLogClient`; otherwise one is built from `base_url` and
    `key` (or `EVENTLOG_URL`, `EVENTLOG_KEY`). Its timeouts apply to every call.
    """

    def __init__(
        self,
        base_url: str | None = None,
        key: str | None = None,
        *,
        client: EventLogClient | None = None,
        name: str = DEFAULT_NAME,
        max_events: int = 10_000,
        publish_timeout: float = 5.0,
        outage_seconds: float = 1.0,
        producer: str | None = None,
    ) -> None:
        self._owns_client = client is None
        self.client = client if client is not None else EventLogClient(base_url, key)
        self.stream_id = bus_stream(name)
        self.max_events = max_events
        self.publish_timeout = publish_timeout
        self.outage_seconds = outage_seconds
        self.producer = producer or f"mcp-bus:{socket.gethostname()}:{os.getpid()}"
        self.failures: Counter[str] = Counter()
        """Publishes that were not stored, by cause (a problem code, `unreachable`,
        `timeout`, `outage`)."""
        self.published = 0
        self.delivered = 0
        """Events handed to the local listeners."""
        self.lagged = 0
        """Times the follower fell behind the retention (or lost its place) and jumped to
        the tail."""
        self.missed = 0
        """Events skipped by those jumps (as far as the follower could count them)."""
        self.undecodable = 0
        self.listener_errors = 0
        self._listeners: dict[object, Listener] = {}
        self._queue: deque[_Entry] = deque()
        self._in_flight: anyio.Event | None = None
        self._generation: str | None = None
        # One look-up (or opening) at a time: publishes racing on a fresh bus would
        # otherwise each open a generation and supersede one another.
        self._finding = anyio.Lock()
        self._outage_until = 0.0
        self._tasks: anyio.abc.TaskGroup | None = None
        self.following = anyio.Event()
        """Set once the follower has taken its place at the tail."""

    # -- SubscriptionBus --------------------------------------------------------------

    async def publish(self, event: ServerEvent) -> None:
        """Store `event` on the bus; every replica's listeners get it. Never raises for the
        service: a failure is logged and counted in `failures`."""
        if anyio.current_time() < self._outage_until:
            self._failed("outage", "the service was just found down")
            return
        entry = _Entry(encode(event))
        self._queue.append(entry)
        try:
            with anyio.fail_after(self.publish_timeout):
                await self._sent(entry)
        except TimeoutError:
            entry.abandoned = True  # if not sent yet, it never will be
            self._outage_until = anyio.current_time() + self.outage_seconds
            self._failed("timeout", f"not stored within {self.publish_timeout:g} s")
            return
        if entry.error is not None:
            if entry.error.status == 0 or entry.error.status >= 500:
                self._outage_until = anyio.current_time() + self.outage_seconds
            self._failed(entry.error.code, entry.error.detail)
            return
        self.published += 1

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Register `listener` on this replica; returns an idempotent unsubscribe."""
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    # -- running ----------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        self._tasks = await anyio.create_task_group().__aenter__()
        self._tasks.start_soon(self.follow_forever)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()
        await self._tasks.__aexit__(exc_type, exc, traceback)
        self._tasks = None
        if self._owns_client:
            await self.client.aclose()

    def asgi_app(self, app: ASGIApp) -> ASGIApp:
        """Wrap an ASGI app so the bus follows its stream while the app serves."""
        return _FollowDuringLifespan(app, self)

    # -- publishing -------------------------------------------------------------------

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
                    with anyio.fail_after(self.publish_timeout):
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
            generation = self._generation or await self._live_generation()
            try:
                # No first_seq: many publishers share the generation, so the service
                # numbers the events; never retried (a retry could store an event twice).
                await self.client.append(generation, events)
                return
            except _FENCED as fenced:
                log.info("bus generation %s refused an append (%s)", generation, fenced.code)
                if self._generation == generation:
                    self._generation = None
        raise EventLogError(409, "fenced", "the bus generation kept changing under the append")

    async def _live_generation(self) -> str:
        """The stream's current generation when it is live, else a new one."""
        async with self._finding:
            if self._generation is not None:
                return self._generation
            current = await self._current()
            if current is None:
                current = await self.client.open_generation(
                    self.stream_id, producer=self.producer, max_events=self.max_events
                )
                log.info("opened bus generation %s of %s", current.token, self.stream_id)
            self._generation = current.token
            return current.token

    async def _newest(self) -> Generation | None:
        """The stream's current generation, whatever its state (None: it has none)."""
        try:
            return (await self.client.stream(self.stream_id)).current
        except UnknownStream:
            return None

    async def _current(self) -> Generation | None:
        """The stream's current generation while it can take appends."""
        current = await self._newest()
        if current is None or current.terminal or current.expired:
            return None
        return current

    def _failed(self, cause: str, detail: str) -> None:
        self.failures[cause] += 1
        log.error(
            "could not publish to bus %s (%s: %s); the event is lost", self.stream_id, cause, detail
        )

    # -- following --------------------------------------------------------------------

    async def follow_forever(self) -> None:
        """Follow the bus stream from its tail until cancelled (what `asgi_app` runs)."""
        backoff = 0.1
        position: str | None = None
        while True:
            try:
                if position is None:
                    position = await self._tail()
                    self.following.set()
                position = await self._follow(position)
                backoff = 0.1
            except (ServiceUnreachable, TimeoutError) as error:
                log.warning(
                    "bus %s: the service is unreachable (%s); retrying", self.stream_id, error
                )
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            except EventLogError as error:
                # The service refused our place (a database wiped, a 5xx): start over at
                # the tail, counted as a lag.
                log.warning(
                    "bus %s: following was refused (%s); rejoining at the tail",
                    self.stream_id,
                    error,
                )
                self.lagged += 1
                position = None
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)

    async def _tail(self) -> str:
        """Where a follower (re)joins: after the last event of the stream's current
        generation, live or not (a finished one answers `reset`, then the next one opened).
        A generation is opened here only when the stream has none at all."""
        current = await self._newest()
        if current is None:
            await self._live_generation()
            current = await self._newest()
        assert current is not None
        return f"{current.token}:{current.tail_seq}"

    async def _follow(self, position: str) -> str | None:
        """Deliver events from `position` until the follower must rejoin; the new place
        (None: at the tail)."""
        follow = self.client.follow(self.stream_id, position, retry=_FOLLOW_RETRY)
        async with aclosing(follow) as items:
            async for item in items:
                if isinstance(item, LiveEvent):
                    self._deliver(item)
                    position = item.id
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
        self.lagged += 1
        token, _, seq = position.rpartition(":")
        current = await self._current()
        skipped = current.tail_seq - int(seq) if current and current.token == token else 0
        self.missed += max(skipped, 0)
        log.warning(
            "bus %s: the follower fell behind (%s); %d events skipped, rejoining at the tail",
            self.stream_id,
            reason,
            skipped,
        )

    def _deliver(self, item: LiveEvent) -> None:
        event = decode(item.data) if item.event == EVENT_TYPE else None
        if event is None:
            self.undecodable += 1
            log.warning("bus %s: event %s is not a server event; skipped", self.stream_id, item.id)
            return
        self.delivered += 1
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:  # the fan-out boundary: one listener never stops the others
                self.listener_errors += 1
                log.exception("a bus listener raised; continuing")


class _FollowDuringLifespan:
    """ASGI middleware: the bus follows its stream for as long as the app's lifespan runs."""

    def __init__(self, app: ASGIApp, bus: EventLogSubscriptionBus) -> None:
        self.app = app
        self.bus = bus

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def started(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                # Be at the tail before the first request is served, if the service
                # answers soon; a service that is down must not keep the server from
                # starting (the follower goes on trying).
                with anyio.move_on_after(_STARTUP_WAIT):
                    await self.bus.following.wait()
            await send(message)

        async with self.bus:
            await self.app(scope, receive, started)

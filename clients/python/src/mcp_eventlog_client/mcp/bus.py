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

The bus is the SDK's door onto three parts with one job each: `BusPublisher`
(`bus_publisher.py`), `BusFollower` (`bus_follower.py`) and `BusGenerations`
(`bus_generations.py`: the generation both append to and follow).

The follower runs while `asgi_app(app)` serves (its lifespan), or inside
`async with bus:` for a host that is not an ASGI app.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Self

import anyio
import anyio.abc
from mcp.shared.subscriptions import ServerEvent
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_eventlog_client import EventLogClient
from mcp_eventlog_client.mcp.bus_events import DEFAULT_NAME, bus_stream
from mcp_eventlog_client.mcp.bus_follower import BusFollower, Listener
from mcp_eventlog_client.mcp.bus_generations import BusGenerations
from mcp_eventlog_client.mcp.bus_publisher import BusPublisher

__all__ = ["EventLogSubscriptionBus", "Listener"]

_STARTUP_WAIT = 5.0


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
        generations = BusGenerations(self)
        self._publisher = BusPublisher(self, generations)
        self._follower = BusFollower(self, generations)
        self.following: anyio.Event = self._follower.following
        """Set once the follower has taken its place at the tail."""
        self._tasks: anyio.abc.TaskGroup | None = None

    # -- SubscriptionBus --------------------------------------------------------------

    async def publish(self, event: ServerEvent) -> None:
        """Store `event` on the bus; every replica's listeners get it. Never raises for the
        service: a failure is logged and counted in `failures`."""
        await self._publisher.publish(event)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Register `listener` on this replica; returns an idempotent unsubscribe."""
        return self._follower.subscribe(listener)

    # -- running ----------------------------------------------------------------------

    async def follow_forever(self) -> None:
        """Follow the bus stream from its tail until cancelled (what `asgi_app` runs)."""
        await self._follower.follow_forever()

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

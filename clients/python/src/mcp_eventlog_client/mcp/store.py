"""`EventLogEventStore`: the MCP SDK's `EventStore`, backed by the event-log service.

Wire it into an `MCPServer` (the SDK's FastMCP) like this::

    store = EventLogEventStore("http://127.0.0.1:8080")
    app = store.asgi_app(server.streamable_http_app(event_store=store))

`asgi_app` is required: it tells the store which MCP session each call serves (see
`mcp_eventlog_client.mcp.scope`); without it `store_event` raises rather than mix sessions.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from typing import get_args

from mcp.server.streamable_http import EventCallback, EventId, EventStore, StreamId
from mcp_types import JSONRPCMessage
from starlette.types import ASGIApp

from mcp_eventlog_client import EventLogClient
from mcp_eventlog_client.mcp.leases import DEFAULT_LEASE_SECONDS, LeaseRenewer
from mcp_eventlog_client.mcp.names import StreamNames
from mcp_eventlog_client.mcp.owners import Owners
from mcp_eventlog_client.mcp.pipelines import StorePipelines
from mcp_eventlog_client.mcp.replay import Owner, Replay, take_replayed
from mcp_eventlog_client.mcp.scope import SessionScopeMiddleware, SessionScopes, current_scope
from mcp_eventlog_client.mcp.writers import Durability, StreamWriters
from mcp_eventlog_client.writer import AppendTransport, choose_append_transport

__all__ = ["DEFAULT_LEASE_SECONDS", "DEFAULT_PIPELINE", "Durability", "EventLogEventStore"]

MiB = 1024 * 1024

DEFAULT_PIPELINE = 128
"""Events a stream may run ahead of the service's acknowledgements (the `pipeline` each
generation is opened with)."""


class EventLogEventStore(EventStore):
    """Stores an MCP server's SSE events in the event-log service, and resumes only safely.

    What is stored, and how a refused resume is told, is the convention both MCP stores
    share (`docs/stream-names.md`):

    - Each SDK stream of each session gets a generation when this process first writes
      to it; every message is one atomic append with `first_seq` from a local counter (so
      a retried append can never be stored twice) and its id is `<token>:<seq>`. A
      message larger than `max_event_bytes` is stored as several
      `message-part <i>/<n>` events of that one append and joined again on replay (see
      `mcp_eventlog_client.mcp.events`).
    - Priming events (`message is None`) are stored (as SSE type `priming`) and never
      replayed as messages. The priming event the SDK sends after a replay is not stored:
      its id is the last one the replay sent, so the stream's generation stays as it was
      and the same id can be resumed again, as often as the client asks.
    - A request stream ends with its response: the next write to the same SDK stream id
      (a client reusing a request id) opens a new generation, so the old execution's ids
      can never be resumed into the new one.
    - A store that fails (the service unreachable, slow past `store_timeout`, a refusal
      such as 413, an answer the client does not trust such as HTML from a proxy, a
      message over `max_message_bytes`) never raises: the SDK still sends the message
      live with an id `unstored:<random>`, the failure is logged and counted in
      `failures`, the generation is marked broken, and the stream's next message opens a
      new generation. Every later
      resume from the placeholder or into the broken generation is refused (`reset`,
      reason `not_stored`), never answered with a gap. After a failure that says the
      service is down (unreachable, 5xx), stores fail fast for `outage_seconds`.
    - `replay_events_after` asks the service for a verdict (see
      `mcp_eventlog_client.mcp.replay`): `resume` sends the missed messages, in order,
      across pages, and follows the live tail of a generation another process is still
      writing until its response arrives; anything else fails the client's request with a
      JSON-RPC error `RESUME_REFUSED` carrying the verdict, the reason and the request's id.

    `durability` says what `store_event` waits for (docs/stores.md has the promises):

    - `"pipelined"` (default): the message gets the stream's next id at once and is
      handed, in order, to the append channel (`GenerationPipeline`); `store_event`
      returns then, and the service acknowledges behind it, several messages per commit.
      At most `pipeline` events of a stream are outstanding (declared when its
      generation is opened): past that, `store_event` waits for the service. A dropped
      channel resends from the first unacknowledged frame (stored once, by `first_seq`).
      A replay in this process first waits for what it handed out of that generation to
      be acknowledged. If the process dies, or a frame cannot be stored, the events it
      had shown and not stored are lost, visibly: a resume from one is answered
      `reset` (`lost_tail`, `abandoned` or `superseded`), never `invalid`, never a splice.
    - `"per_event"`: `store_event` returns after the service committed the message: one
      round trip and one durable commit per message, on the SDK's path to the client (the
      SDK awaits the store before it sends), about 20x the store-less call on one core
      of a loaded machine (docs/performance.md). A message the client sees is stored.

    Either way the store renews the writer leases of the generations it writes while it
    is alive, however long a tool stays silent (every `lease_seconds` / 3, all of them in
    one burst of lease frames on the channel); when the process dies the service marks
    them abandoned after the lease, and their readers are told. A request stream's lease
    is renewed for `keep_finished_seconds` (300 s) after its response, so a client that
    lost the response can resume meanwhile; a resume later than that plus the lease is
    answered `reset`/`abandoned` (the client re-issues the request).

    Sessions are kept apart by `asgi_app` (see `mcp_eventlog_client.mcp.scope`): every
    service stream is named after its session's scope key, and nothing of another session
    is ever sent.

    The store is the SDK's door onto four parts with one job each: `StreamWriters`
    (`mcp_eventlog_client.mcp.writers`: generations, appends, the pipelined hand-off,
    failed stores), `StorePipelines` (what is handed out and not yet acknowledged),
    `LeaseRenewer` (`mcp_eventlog_client.mcp.leases`) and `Owners` (whose each token is);
    a replay is a `Replay` (`mcp_eventlog_client.mcp.replay`).

    Appends go over the append channel by default: one WebSocket per store (so per
    process) carries every append of every stream of every session, and REST takes over
    where a WebSocket cannot pass (the upgrade refused or failed: counted in
    `append_fallbacks` and logged). `append_transport="rest"` (or
    `EVENTLOG_APPEND_TRANSPORT=rest`) sends one REST request per append instead.

    Pass `client` to share an `EventLogClient` (its own `append_transport` then decides);
    otherwise one is built from `base_url` and `key` (or `EVENTLOG_URL`, `EVENTLOG_KEY`)
    and reused for every call.
    """

    def __init__(
        self,
        base_url: str | None = None,
        key: str | None = None,
        *,
        client: EventLogClient | None = None,
        producer: str | None = None,
        max_events: int | None = None,
        ttl_seconds: int | None = None,
        page_limit: int | None = None,
        max_streams: int = 100_000,
        max_sessions: int = 10_000,
        max_event_bytes: int = MiB,
        max_message_bytes: int = 16 * MiB,
        outage_seconds: float = 1.0,
        store_timeout: float = 10.0,
        replay_timeout: float = 10.0,
        follow_seconds: float = 300.0,
        append_transport: AppendTransport | None = None,
        durability: Durability = "pipelined",
        pipeline: int = DEFAULT_PIPELINE,
        lease_seconds: int | None = None,
        keep_finished_seconds: float = 300.0,
    ) -> None:
        if durability not in get_args(Durability):
            raise ValueError(f"durability is {durability!r}: one of 'pipelined', 'per_event'")
        self.durability: Durability = durability
        self.pipeline = pipeline
        """Events a stream may run ahead of the service (pipelined mode)."""
        self.lease_seconds = lease_seconds
        """The writer lease each generation is opened with (None: the service's default)."""
        self.keep_finished_seconds = keep_finished_seconds
        """Seconds a request stream's lease is still renewed after its response, so a
        client that lost the response can resume it meanwhile."""
        self._owns_client = client is None
        self.client = (
            client
            if client is not None
            else EventLogClient(
                base_url, key, append_transport=choose_append_transport(append_transport, "channel")
            )
        )
        self.producer = producer or f"mcp:{socket.gethostname()}:{os.getpid()}"
        self.max_events = max_events
        self.ttl_seconds = ttl_seconds
        self.page_limit = page_limit
        self.max_event_bytes = max_event_bytes
        self.max_message_bytes = max_message_bytes
        self.outage_seconds = outage_seconds
        self.store_timeout = store_timeout
        """Seconds one `store_event` may wait for the service, retries included: the SDK
        awaits the store in the session's message router, so the whole session waits."""
        self.replay_timeout = replay_timeout
        """Seconds a replay waits for the service's verdict and stored pages."""
        self.follow_seconds = follow_seconds
        """Seconds a replay follows a generation another process is writing; then the
        connection ends and the client reconnects from its last id."""
        self.failures: Counter[str] = Counter()
        """Failed stores by cause: the service's problem code, `unreachable`, `outage`
        (skipped while the service is down), or `message_too_large`."""
        self.names = StreamNames()
        self._owners = Owners(max_streams)
        self._pipelines = StorePipelines(max_streams)
        self._leases = LeaseRenewer(
            self.client,
            self._owners,
            lambda written_before: self._writers.silent(written_before),
            lease_seconds=lease_seconds,
            bound=max_streams,
        )
        self._writers = StreamWriters(
            self, self._owners, self._pipelines, self._leases, bound=max_streams
        )
        self.scopes = SessionScopes(max_sessions, on_end=self._writers.session_ended)

    @property
    def append_fallbacks(self) -> Counter[str]:
        """Appends that went over REST although the channel was chosen, by reason."""
        return self.client.fallbacks

    @property
    def failed_stores(self) -> int:
        """How many `store_event` calls failed to store their message (see `failures`)."""
        return sum(self.failures.values())

    @property
    def renewals(self) -> int:
        """Lease renewals sent (appends renew too; only silent generations are renewed)."""
        return self._leases.renewals

    def asgi_app(self, app: ASGIApp) -> ASGIApp:
        """Wrap the SDK's streamable HTTP app so every call knows its session (required)."""
        return SessionScopeMiddleware(app, self.scopes, on_shutdown=self.aclose)

    async def aclose(self, settle_seconds: float = 5.0) -> None:
        """Stop renewing leases, wait up to `settle_seconds` for what was handed out to be
        acknowledged, and release the client's connections (if this store created it)."""
        self._leases.stop()
        await self._pipelines.aclose(settle_seconds)
        if self._owns_client:
            await self.client.aclose()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Store one message; return its `<token>:<seq>` id. Never raises for the service."""
        scope = current_scope()
        if scope is None:
            raise RuntimeError(
                "EventLogEventStore does not know the MCP session: serve the app returned by "
                "store.asgi_app(server.streamable_http_app(event_store=store))"
            )
        replayed = take_replayed(scope, stream_id) if message is None else None
        if replayed is not None:
            return replayed
        return await self._writers.write(scope, stream_id, message)

    async def settle(self, token: str) -> None:
        """Wait (up to `replay_timeout`) until every event this process handed out of
        generation `token` is acknowledged, so a replay reads what the client was shown."""
        await self._pipelines.settle(token, within=self.replay_timeout)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the messages missed after `last_event_id` if, and only if, it may resume."""
        return await Replay(self, last_event_id, send_callback).run()

    def owner_of(self, token: str) -> Owner | None:
        """The session and SDK stream of a generation this process opened (or a placeholder
        it handed out), if it still remembers."""
        return self._owners.get(token)

    def writes(self, scope: str, sdk_stream: StreamId, generation: str) -> bool:
        """Whether this process is writing `generation` as the session's SDK stream now."""
        return self._writers.writes(scope, sdk_stream, generation)

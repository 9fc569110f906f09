"""`EventLogEventStore`: the MCP SDK's `EventStore`, backed by the event-log service.

Wire it into an `MCPServer` (the SDK's FastMCP) like this::

    store = EventLogEventStore("http://127.0.0.1:8080")
    app = store.asgi_app(server.streamable_http_app(event_store=store))

`asgi_app` is required: it tells the store which MCP session each call serves (see
`mcp_eventlog_client.mcp.scope`); without it `store_event` raises rather than mix sessions.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Literal, get_args

import anyio
import sniffio
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventStore,
    StreamId,
)
from mcp_types import JSONRPCMessage
from starlette.types import ASGIApp

from mcp_eventlog_client import EventLogClient, EventLogError, NewEvent
from mcp_eventlog_client.mcp.events import events_of
from mcp_eventlog_client.mcp.names import StreamNames
from mcp_eventlog_client.mcp.refusal import new_placeholder
from mcp_eventlog_client.mcp.replay import Owner, Replay, ends_request, take_replayed
from mcp_eventlog_client.mcp.scope import SessionScopeMiddleware, SessionScopes, current_scope
from mcp_eventlog_client.pipeline import GenerationPipeline
from mcp_eventlog_client.writer import AppendTransport, GenerationReason, choose_append_transport

log = logging.getLogger(__name__)

MiB = 1024 * 1024

Durability = Literal["pipelined", "per_event"]
"""When `store_event` returns: once the message is handed, in order, to the append
channel (`pipelined`, the default), or once the service committed it (`per_event`)."""

DEFAULT_PIPELINE = 128
"""Events a stream may run ahead of the service's acknowledgements (the `pipeline` each
generation is opened with)."""
DEFAULT_LEASE_SECONDS = 30
"""The service's default writer lease, used to pace renewals until a generation says."""
_FENCED = frozenset({"superseded", "terminal", "abandoned"})
"""Refusals that end a generation for its writer: the next message opens a new one."""


@dataclass(slots=True)
class _Stream:
    """This process's writer state for one SDK stream of one session."""

    lock: anyio.Lock = field(default_factory=anyio.Lock)
    generation: str | None = None
    next_seq: int = 1
    pipeline: GenerationPipeline | None = None
    """The generation's pipelined writer (pipelined mode), else None."""
    last_write: float = 0.0
    """When an acknowledged append last renewed the generation's lease (per-event mode)."""


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
        self.scopes = SessionScopes(max_sessions, on_end=self._session_ended)
        self.names = StreamNames()
        # Bounded: a stream that never gets its response (an abandoned GET stream) would
        # otherwise stay forever. A forgotten stream's next write opens a new generation.
        self._streams: OrderedDict[tuple[str, StreamId], _Stream] = OrderedDict()
        self._max_streams = max_streams
        # Which session and SDK stream each generation this process opened (and each
        # placeholder it handed out) belongs to, so a replay is decided on its own
        # stream's route, and another session's token, or a broken generation's, is
        # refused without asking the service. Bounded like the streams; a forgotten token
        # falls back to `/v1/resume` and a check of the stream the service names.
        self._owners: OrderedDict[str, Owner] = OrderedDict()
        self._outage_until = 0.0
        # The pipelines with events not yet acknowledged, or still written, by token: a
        # replay waits for its generation's, and `aclose` for all of them.
        self._pipelines: OrderedDict[str, GenerationPipeline] = OrderedDict()
        self._lease_seconds = float(lease_seconds or DEFAULT_LEASE_SECONDS)
        self._renewer: asyncio.Task[None] | None = None
        # The pipeline of a request stream that ended with events still unacknowledged: a
        # new generation of the same SDK stream (a reused request id) is opened only once
        # they are stored, or the new one would fence them out.
        self._finishing: dict[tuple[str, StreamId], GenerationPipeline] = {}
        # Finished request generations whose leases are renewed until then (loop time).
        self._finished: OrderedDict[str, float] = OrderedDict()
        self.renewals = 0
        """Lease renewals sent (appends renew too; only silent generations are renewed)."""

    @property
    def append_fallbacks(self) -> Counter[str]:
        """Appends that went over REST although the channel was chosen, by reason."""
        return self.client.fallbacks

    @property
    def failed_stores(self) -> int:
        """How many `store_event` calls failed to store their message (see `failures`)."""
        return sum(self.failures.values())

    def asgi_app(self, app: ASGIApp) -> ASGIApp:
        """Wrap the SDK's streamable HTTP app so every call knows its session (required)."""
        return SessionScopeMiddleware(app, self.scopes, on_shutdown=self.aclose)

    async def aclose(self, settle_seconds: float = 5.0) -> None:
        """Stop renewing leases, wait up to `settle_seconds` for what was handed out to be
        acknowledged, and release the client's connections (if this store created it)."""
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.cancel()
        for pipeline in list(self._pipelines.values()):
            await pipeline.settle(within=settle_seconds)
            await pipeline.aclose()
        self._pipelines.clear()
        if self._owns_client:
            await self.client.aclose()

    def _pipelined(self) -> bool:
        """Pipelined mode, where it can run (its flusher and the channel need asyncio)."""
        if self.durability != "pipelined":
            return False
        try:
            return sniffio.current_async_library() == "asyncio"
        except sniffio.AsyncLibraryNotFoundError:
            return False

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
        key = (scope, stream_id)
        stream = self._stream(key)
        data = (
            None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        )
        # Pipelined, with room in the window and no other store of the stream under way:
        # handed without awaiting anything, so nothing can come between (the common case,
        # and the cheapest: no lock, no deadline).
        event_id = None if stream.lock.locked() else self._hand_now(stream, data)
        if event_id is None:
            # One append at a time per stream: the local seq counter follows append order.
            async with stream.lock:
                event_id = await self._store(scope, stream_id, stream, data)
        if _ends_request(stream_id, message) and self._streams.get(key) is stream:
            # The request's stream is done: its lease is renewed only for
            # `keep_finished_seconds` more, and its pipeline is forgotten once
            # acknowledged.
            del self._streams[key]
            self._keep_finished(stream)
            if stream.pipeline is not None and stream.pipeline.unacknowledged:
                self._finishing[key] = stream.pipeline
            self._forget(stream)
        return event_id

    def _hand_now(self, stream: _Stream, data: str | None) -> str | None:
        """The message's id if its stream's pipeline takes it at once, else None."""
        pipeline = stream.pipeline
        if pipeline is None or pipeline.error is not None or stream.generation is None:
            return None
        if data is not None and len(data) * 3 > self.max_message_bytes:
            return None  # perhaps too large: `_store` measures it and refuses it
        if anyio.current_time() < self._outage_until:
            return None
        seq = pipeline.try_hand(events_of(data, self.max_event_bytes))
        return None if seq is None else f"{pipeline.generation}:{seq}"

    def _stream(self, key: tuple[str, StreamId]) -> _Stream:
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream()
            while len(self._streams) > self._max_streams:
                self._streams.popitem(last=False)
        else:
            self._streams.move_to_end(key)
        return stream

    async def _store(
        self, scope: str, stream_id: StreamId, stream: _Stream, data: str | None
    ) -> str:
        size = 0 if data is None else len(data.encode())
        if size > self.max_message_bytes:
            return self._failed(scope, stream_id, stream, "message_too_large", f"{size} bytes")
        if anyio.current_time() < self._outage_until:
            return self._failed(scope, stream_id, stream, "outage", "the service was just down")
        try:
            with anyio.fail_after(self.store_timeout):
                return await self._append(
                    scope, stream_id, stream, events_of(data, self.max_event_bytes)
                )
        except TimeoutError:
            self._outage_until = anyio.current_time() + self.outage_seconds
            detail = f"no acknowledgement within {self.store_timeout:g} s"
            return self._failed(scope, stream_id, stream, "timeout", detail)
        except EventLogError as error:
            if error.status == 0 or error.status >= 500:
                self._outage_until = anyio.current_time() + self.outage_seconds
            return self._failed(scope, stream_id, stream, error.code, error.detail)

    async def _append(
        self, scope: str, stream_id: StreamId, stream: _Stream, events: list[NewEvent]
    ) -> str:
        if self._pipelined():
            return await self._hand(scope, stream_id, stream, events)
        if stream.generation is None:
            await self._open(scope, stream_id, stream)
        try:
            return await self._append_message(stream, events)
        except EventLogError as fenced:
            if fenced.code not in _FENCED:
                raise
            # Someone (an operator, another writer, the lease sweep) ended this generation:
            # continue in a new one, so the old ids reset rather than resume into
            # different events.
            log.warning(
                "generation %s refused an append (%s); opening a new one",
                stream.generation,
                fenced.code,
            )
            await self._open(scope, stream_id, stream, reason="reset")
            return await self._append_message(stream, events)

    async def _append_message(self, stream: _Stream, events: list[NewEvent]) -> str:
        """One message, one atomic append (all its parts, or none)."""
        assert stream.generation is not None
        result = await self.client.append(stream.generation, events, first_seq=stream.next_seq)
        stream.next_seq += len(events)
        stream.last_write = anyio.current_time()
        return result.event_ids[-1]

    async def _hand(
        self, scope: str, stream_id: StreamId, stream: _Stream, events: list[NewEvent]
    ) -> str:
        """Pipelined: the message's id at once; its append follows behind."""
        pipeline = stream.pipeline
        if stream.generation is None or pipeline is None or pipeline.error is not None:
            broke = pipeline is not None and pipeline.error is not None
            await self._open(scope, stream_id, stream, reason="reset" if broke else None)
            pipeline = stream.pipeline
        assert pipeline is not None
        try:
            seq = await pipeline.hand(events)
        except EventLogError:
            # The pipeline broke (already counted and marked by `_broken`) while this
            # message waited for the window: it goes into a new generation instead.
            await self._open(scope, stream_id, stream, reason="reset")
            pipeline = stream.pipeline
            assert pipeline is not None
            seq = await pipeline.hand(events)
        return f"{pipeline.generation}:{seq}"

    async def _open(
        self,
        scope: str,
        stream_id: StreamId,
        stream: _Stream,
        reason: GenerationReason | None = None,
    ) -> None:
        pipelined = self._pipelined()
        previous = self._finishing.pop((scope, stream_id), None)
        if previous is not None:
            await previous.settle(within=self.store_timeout)
        generation = await self.client.open_generation(
            self.names.name(scope, stream_id),
            reason=reason,
            producer=self.producer,
            max_events=self.max_events,
            ttl_seconds=self.ttl_seconds,
            lease_seconds=self.lease_seconds,
            pipeline=self.pipeline if pipelined else None,
        )
        if generation.lease_seconds:
            self._lease_seconds = min(self._lease_seconds, float(generation.lease_seconds))
        self._forget(stream)
        stream.generation, stream.next_seq = generation.token, 1
        stream.last_write = anyio.current_time()
        self._own(generation.token, Owner(scope, stream_id))
        if pipelined:
            stream.pipeline = GenerationPipeline(
                self.client,
                generation.token,
                window=self.pipeline,
                give_up_after=self.store_timeout,
                on_broken=lambda pipeline, error: self._broken(scope, stream_id, pipeline, error),
            )
            self._pipelines[generation.token] = stream.pipeline
            self._prune_pipelines()
        self._start_renewer()

    def _session_ended(self, scope: str) -> None:
        """A session ended (or was forgotten): its streams' leases are no longer renewed
        (what they handed out is still stored), and its next messages, if any, start anew."""
        for key in [key for key in self._streams if key[0] == scope]:
            self._forget(self._streams.pop(key))

    def _keep_finished(self, stream: _Stream) -> None:
        if stream.generation is None or self.keep_finished_seconds <= 0:
            return
        self._finished[stream.generation] = anyio.current_time() + self.keep_finished_seconds
        self._finished.move_to_end(stream.generation)
        while len(self._finished) > self._max_streams:
            self._finished.popitem(last=False)

    def _forget(self, stream: _Stream) -> None:
        """No more is handed to the stream's pipeline (it stays until acknowledged)."""
        if stream.pipeline is not None:
            stream.pipeline.finished = True
            stream.pipeline = None

    def _prune_pipelines(self) -> None:
        """Forget finished pipelines once acknowledged (or broken), and the oldest past
        the bound."""
        for token, pipeline in list(self._pipelines.items()):
            settled = pipeline.unacknowledged == 0 or pipeline.error is not None
            if pipeline.finished and settled:
                del self._pipelines[token]
        while len(self._pipelines) > self._max_streams:
            self._pipelines.popitem(last=False)
        for key, pipeline in list(self._finishing.items()):
            if pipeline.unacknowledged == 0 or pipeline.error is not None:
                del self._finishing[key]

    def _broken(
        self, scope: str, stream_id: StreamId, pipeline: GenerationPipeline, error: EventLogError
    ) -> None:
        """A pipeline lost events it had handed out: count it, and refuse its resumes."""
        self.failures[error.code] += 1
        if error.status == 0 or error.status >= 500:
            self._outage_until = anyio.current_time() + self.outage_seconds
        self._own(pipeline.generation, Owner(scope, stream_id, broken=True))

    async def settle(self, token: str) -> None:
        """Wait (up to `replay_timeout`) until every event this process handed out of
        generation `token` is acknowledged, so a replay reads what the client was shown."""
        pipeline = self._pipelines.get(token)
        if pipeline is not None:
            await pipeline.settle(within=self.replay_timeout)

    def _start_renewer(self) -> None:
        """The lease renewer of this event loop, started with the first generation."""
        try:
            loop = asyncio.get_running_loop()
            library = sniffio.current_async_library()
        except (RuntimeError, sniffio.AsyncLibraryNotFoundError):
            return
        renewer = self._renewer
        if library != "asyncio" or (
            renewer is not None and not renewer.done() and renewer.get_loop() is loop
        ):
            return
        self._renewer = loop.create_task(self._renew_leases())

    async def _renew_leases(self) -> None:
        """Every lease / 3: renew the leases of the generations this process writes that
        no acknowledged append renewed since the last round, all at once."""
        while True:
            interval = self._lease_seconds / 3
            await asyncio.sleep(interval)
            try:
                await self._renew_silent(anyio.current_time() - interval)
            except Exception:  # the next round tries again; never stop renewing
                log.exception("renewing the writer leases failed")

    async def _renew_silent(self, written_before: float) -> None:
        silent = []
        for stream in list(self._streams.values()):
            pipeline = stream.pipeline
            if pipeline is not None and pipeline.error is None:
                if pipeline.last_write <= written_before:
                    silent.append(pipeline.generation)
            elif (
                pipeline is None
                and stream.generation is not None
                and stream.last_write <= written_before
            ):
                silent.append(stream.generation)
        now = anyio.current_time()
        for token, until in list(self._finished.items()):
            owner = self._owners.get(token)
            if until < now or (owner is not None and owner.broken):
                del self._finished[token]
            else:
                silent.append(token)
        self._prune_pipelines()
        if not silent:
            return
        outcomes = await self.client.renew_leases(silent)
        self.renewals += len(silent)
        for token, outcome in outcomes.items():
            if isinstance(outcome, EventLogError):
                log.warning("the lease of generation %s was not renewed: %s", token, outcome)

    def _own(self, token: str, owner: Owner) -> None:
        self._owners[token] = owner
        self._owners.move_to_end(token)
        while len(self._owners) > self._max_streams:
            self._owners.popitem(last=False)

    def _failed(
        self, scope: str, stream_id: StreamId, stream: _Stream, cause: str, detail: str
    ) -> str:
        """Count and log a failed store; give the message a placeholder id, never resumed."""
        self.failures[cause] += 1
        # The generation now lacks this message (or cannot be known to hold it): it is
        # never written again nor resumed, and the stream's next message opens a new one,
        # which supersedes it in the service too.
        broken = Owner(scope, stream_id, broken=True)
        if stream.generation is not None:
            self._own(stream.generation, broken)
        placeholder = new_placeholder()
        self._own(placeholder, broken)
        log.error(
            "could not store an event of MCP stream %r (%s: %s); it is sent live as %s, and "
            "a resume of generation %s is refused",
            stream_id,
            cause,
            detail,
            placeholder,
            stream.generation,
        )
        stream.generation, stream.next_seq = None, 1
        self._forget(stream)
        return placeholder

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
        stream = self._streams.get((scope, sdk_stream))
        return stream is not None and stream.generation == generation


def _ends_request(stream_id: StreamId, message: JSONRPCMessage | None) -> bool:
    # A response (or error) is the last message of a request's stream; the standalone GET
    # stream has no end.
    return stream_id != GET_STREAM_KEY and ends_request(message)

"""`EventLogEventStore`: the MCP SDK's `EventStore`, backed by the event-log service.

Wire it into an `MCPServer` (the SDK's FastMCP) like this::

    store = EventLogEventStore("http://127.0.0.1:8080")
    app = store.asgi_app(server.streamable_http_app(event_store=store))

`asgi_app` is required: it tells the store which MCP session each call serves (see
`mcp_eventlog_client.mcp.scope`); without it `store_event` raises rather than mix sessions.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections import Counter, OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse
from mcp_types import jsonrpc_message_adapter as message_adapter
from starlette.types import ASGIApp

from mcp_eventlog_client import EventLogClient, EventLogError, NewEvent, ResumeAnswer, Verdict
from mcp_eventlog_client.errors import Superseded, TerminalGeneration
from mcp_eventlog_client.mcp.events import MidMessage, Reassembly, batches, events_of
from mcp_eventlog_client.mcp.names import StreamNames
from mcp_eventlog_client.mcp.refusal import refuse
from mcp_eventlog_client.mcp.scope import SessionScopeMiddleware, SessionScopes, current_scope
from mcp_eventlog_client.writer import GenerationReason

log = logging.getLogger(__name__)

MiB = 1024 * 1024
_NOT_THIS_SESSION = "the event id does not belong to this session"
_NOT_STORED = "an event of this stream could not be stored; its stored events have a gap"


@dataclass(slots=True)
class _Stream:
    """This process's writer state for one SDK stream of one session."""

    lock: anyio.Lock = field(default_factory=anyio.Lock)
    generation: str | None = None
    next_seq: int = 1


@dataclass(frozen=True, slots=True)
class _Owner:
    """The session and SDK stream of a generation; `broken` once a store into it failed."""

    scope: str
    sdk_stream: StreamId
    broken: bool = False


@dataclass(frozen=True, slots=True)
class _Replayed:
    """A replay that just resumed `sdk_stream` of `scope`; the client is now at `last_id`."""

    scope: str
    sdk_stream: StreamId
    last_id: str


# Set by a resume, read by the priming event the SDK stores right after it, in the same task
# (`streamable_http.py`, `replay_sender`): that event needs no write, see `store_event`.
_replayed: ContextVar[_Replayed | None] = ContextVar("mcp_eventlog_replayed", default=None)


class EventLogEventStore(EventStore):
    """Stores an MCP server's SSE events in the event-log service, and resumes only safely.

    - Each SDK stream of each session gets a generation when this process first writes
      to it; every event is appended with `first_seq` from a local counter (so a retried
      append can never be stored twice) and its id is the service's `<token>:<seq>`.
      A message larger than `max_event_bytes` is stored as several events and joined
      again on replay (see `mcp_eventlog_client.mcp.events`).
    - Priming events (`message is None`) are stored (as SSE type `priming`) and never
      replayed as messages. The priming event the SDK sends after a replay is not stored:
      its id is the last one the replay sent, so the stream's generation stays as it was
      and the same id can be resumed again, as often as the client asks.
    - A request stream ends with its response: the next write to the same SDK stream id
      (a client reusing a request id) opens a new generation, so the old execution's ids
      can never be resumed into the new one.
    - A store that fails (the service unreachable, a refusal such as 413) never raises:
      the SDK still sends the message live, the failure is logged and counted in
      `failures`, the generation is marked broken, and the stream's next message opens a
      new generation. Every later resume into the broken generation is refused (`reset`,
      reason `store_failed`), never answered with a gap. After a failure that says the
      service is down (unreachable, 5xx), stores fail fast for `outage_seconds`.
    - `replay_events_after` asks the service for a verdict. `resume`: the missed messages
      are sent, in order, across pages. `reset` or `invalid`, or an id of another session:
      no stored event is sent, the reason is logged, None is returned, and (except on the
      standalone GET stream) the client's request is failed with a JSON-RPC error
      `RESUME_REFUSED` carrying the verdict and reason, and the request's id (see
      `mcp_eventlog_client.mcp.refusal`).

    Sessions are kept apart by `asgi_app` (see `mcp_eventlog_client.mcp.scope`): every
    service stream is named after its session's scope key. A token this process opened is
    resumed on its own stream's route, or refused without asking the service when it is
    another session's; any other token is decided by `/v1/resume` and refused unless the
    stream the service names is this session's. Either way nothing of another session is
    sent.

    Pass `client` to share an `EventLogClient`; otherwise one is built from `base_url` and
    `key` (or `EVENTLOG_URL`, `EVENTLOG_KEY`) and reused for every call.
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
        max_batch_bytes: int = 8 * MiB,
        max_message_bytes: int = 64 * MiB,
        outage_seconds: float = 1.0,
    ) -> None:
        self._owns_client = client is None
        self.client = client if client is not None else EventLogClient(base_url, key)
        self.producer = producer or f"mcp:{socket.gethostname()}:{os.getpid()}"
        self.max_events = max_events
        self.ttl_seconds = ttl_seconds
        self.page_limit = page_limit
        self.max_event_bytes = max_event_bytes
        self.max_batch_bytes = max_batch_bytes
        self.max_message_bytes = max_message_bytes
        self.outage_seconds = outage_seconds
        self.failures: Counter[str] = Counter()
        """Failed stores by cause: the service's problem code, `unreachable`, `outage`
        (skipped while the service is down), or `message_too_large`."""
        self.scopes = SessionScopes(max_sessions)
        self.names = StreamNames()
        # Bounded: a stream that never gets its response (an abandoned GET stream) would
        # otherwise stay forever. A forgotten stream's next write opens a new generation.
        self._streams: OrderedDict[tuple[str, StreamId], _Stream] = OrderedDict()
        self._max_streams = max_streams
        # Which session and SDK stream each generation this process opened belongs to, so
        # a replay is decided on its own stream's route (and another session's token, or
        # a broken generation's, is refused without asking the service). Bounded like the
        # streams; a forgotten token falls back to `/v1/resume` and a check of the stream
        # the service names (a broken one is superseded there by the stream's next write).
        self._owners: OrderedDict[str, _Owner] = OrderedDict()
        self._outage_until = 0.0

    @property
    def failed_stores(self) -> int:
        """How many `store_event` calls failed to store their message (see `failures`)."""
        return sum(self.failures.values())

    def asgi_app(self, app: ASGIApp) -> ASGIApp:
        """Wrap the SDK's streamable HTTP app so every call knows its session (required)."""
        return SessionScopeMiddleware(app, self.scopes, on_shutdown=self.aclose)

    async def aclose(self) -> None:
        """Release the client's connections (if this store created the client)."""
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
        replayed = _replayed.get()
        if message is None and replayed is not None and replayed.scope == scope:
            _replayed.set(None)
            if replayed.sdk_stream == stream_id:
                return replayed.last_id
        key = (scope, stream_id)
        stream = self._stream(key)
        # One append at a time per stream: the local seq counter must follow append order.
        async with stream.lock:
            event_id = await self._store(scope, stream_id, stream, message)
            if _ends_request(stream_id, message) and self._streams.get(key) is stream:
                del self._streams[key]
        return event_id

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
        self, scope: str, stream_id: StreamId, stream: _Stream, message: JSONRPCMessage | None
    ) -> str:
        data = (
            None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        )
        size = 0 if data is None else len(data.encode())
        if size > self.max_message_bytes:
            return self._failed(scope, stream_id, stream, "message_too_large", f"{size} bytes")
        if anyio.current_time() < self._outage_until:
            return self._failed(scope, stream_id, stream, "outage", "the service was just down")
        try:
            return await self._append(
                scope, stream_id, stream, events_of(data, self.max_event_bytes)
            )
        except EventLogError as error:
            if error.status == 0 or error.status >= 500:
                self._outage_until = anyio.current_time() + self.outage_seconds
            return self._failed(scope, stream_id, stream, error.code, error.detail)

    async def _append(
        self, scope: str, stream_id: StreamId, stream: _Stream, events: list[NewEvent]
    ) -> str:
        if stream.generation is None:
            await self._open(scope, stream_id, stream)
        try:
            return await self._append_batches(stream, events)
        except (Superseded, TerminalGeneration) as fenced:
            # Someone (an operator, another writer) ended this generation: continue in a new
            # one, so the old ids reset rather than resume into different events.
            log.warning(
                "generation %s refused an append (%s); opening a new one",
                stream.generation,
                fenced.code,
            )
            await self._open(scope, stream_id, stream, reason="reset")
            return await self._append_batches(stream, events)

    async def _append_batches(self, stream: _Stream, events: list[NewEvent]) -> str:
        assert stream.generation is not None
        event_id = ""
        for batch in batches(events, self.max_batch_bytes):
            result = await self.client.append(stream.generation, batch, first_seq=stream.next_seq)
            stream.next_seq += len(batch)
            event_id = result.event_ids[-1]
        return event_id

    async def _open(
        self,
        scope: str,
        stream_id: StreamId,
        stream: _Stream,
        reason: GenerationReason | None = None,
    ) -> None:
        generation = await self.client.open_generation(
            self.names.name(scope, stream_id),
            reason=reason,
            producer=self.producer,
            max_events=self.max_events,
            ttl_seconds=self.ttl_seconds,
        )
        stream.generation, stream.next_seq = generation.token, 1
        self._own(generation.token, _Owner(scope, stream_id))

    def _own(self, token: str, owner: _Owner) -> None:
        self._owners[token] = owner
        self._owners.move_to_end(token)
        while len(self._owners) > self._max_streams:
            self._owners.popitem(last=False)

    def _failed(
        self, scope: str, stream_id: StreamId, stream: _Stream, cause: str, detail: str
    ) -> str:
        """Count and log a failed store; give the message an id that is never resumed."""
        self.failures[cause] += 1
        # The generation now lacks this message (or cannot be known to hold it): it is
        # never written again nor resumed, and the stream's next message opens a new one,
        # which supersedes it in the service too.
        token = stream.generation or secrets.token_urlsafe(16)
        event_id = f"{token}:{stream.next_seq}"
        self._own(token, _Owner(scope, stream_id, broken=True))
        stream.generation, stream.next_seq = None, 1
        log.error(
            "could not store an event of MCP stream %r (%s: %s); it is sent live, and a "
            "resume of %s is refused",
            stream_id,
            cause,
            detail,
            token,
        )
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the messages missed after `last_event_id` if, and only if, it may resume."""
        scope = current_scope()
        if scope is None:
            log.error("replay outside SessionScopeMiddleware: refusing %r", last_event_id)
            return None
        known = self._owners.get(last_event_id.rpartition(":")[0])
        if known is not None and known.scope != scope:
            log.warning("not resuming %r: it belongs to another session", last_event_id)
            await refuse(
                send_callback, known.sdk_stream, Verdict.INVALID, "cross_session", _NOT_THIS_SESSION
            )
            return None
        if known is not None and known.broken:
            log.warning("not resuming %r: a store into its generation failed", last_event_id)
            await refuse(
                send_callback, known.sdk_stream, Verdict.RESET, "store_failed", _NOT_STORED
            )
            return None
        service_stream = None if known is None else self.names.name(scope, known.sdk_stream)
        try:
            answer = await self.client.resume(
                last_event_id, stream_id=service_stream, limit=self.page_limit
            )
        except EventLogError as error:
            log.warning("not resuming %r: the service failed (%s)", last_event_id, error)
            sdk_stream = None if known is None else known.sdk_stream
            await refuse(send_callback, sdk_stream, "unavailable", error.code, error.detail)
            return None
        owner = None if answer.stream_id is None else self.names.parse(answer.stream_id)
        if owner is None or owner[0] != scope:
            await self._refuse_foreign(answer, owner, send_callback)
            return None
        return await self._resume(answer, owner[1], send_callback, scope)

    async def _resume(
        self, answer: ResumeAnswer, sdk_stream: StreamId, send_callback: EventCallback, scope: str
    ) -> StreamId | None:
        if answer.verdict is not Verdict.RESUME:
            log.info(
                "not resuming %r: %s/%s (%s)",
                answer.last_event_id,
                answer.verdict,
                answer.reason,
                answer.detail,
            )
            if sdk_stream != GET_STREAM_KEY:
                await refuse(
                    send_callback, sdk_stream, answer.verdict, answer.reason, answer.detail
                )
            return None
        try:
            last_id = await self._send_missed(answer, send_callback)
        except MidMessage as inside:
            log.warning("not resuming %r: %s", answer.last_event_id, inside)
            await refuse(send_callback, sdk_stream, Verdict.INVALID, "mid_message", str(inside))
            return None
        if last_id is None:
            return None
        _replayed.set(_Replayed(scope, sdk_stream, last_id))
        return sdk_stream

    async def _refuse_foreign(
        self, answer: ResumeAnswer, owner: tuple[str, str] | None, send_callback: EventCallback
    ) -> None:
        """Refuse an id whose stream is not one of this session's."""
        if answer.stream_id is None:
            # The service itself found no stream (malformed id, unknown token): `invalid`.
            # No stream, so no request id: the error's id is null.
            log.info(
                "not resuming %r: %s/%s (%s)",
                answer.last_event_id,
                answer.verdict,
                answer.reason,
                answer.detail,
            )
            await refuse(send_callback, None, answer.verdict, answer.reason, answer.detail)
            return
        # A real token of another session (or of a stream not written by this store):
        # whatever the service's verdict, this session may not see it.
        log.warning("not resuming %r: it belongs to another session", answer.last_event_id)
        sdk_stream = None if owner is None else owner[1]
        await refuse(send_callback, sdk_stream, Verdict.INVALID, "cross_session", _NOT_THIS_SESSION)

    async def _send_missed(self, answer: ResumeAnswer, send_callback: EventCallback) -> str | None:
        """Send the resumed messages; the id the client is then at, None if paging failed.

        Raises `MidMessage` before anything is sent if the replay starts inside a message.
        """
        assert answer.generation is not None
        joined = Reassembly()
        last_id = answer.last_event_id
        try:
            for event in answer.events:
                last_id = await _send_joined(
                    joined, event.event, event.data, event.id, send_callback, last_id
                )
            if answer.next_after is not None:
                async for event in self.client.events_after(
                    answer.generation, answer.next_after, limit=self.page_limit
                ):
                    last_id = await _send_joined(
                        joined, event.event, event.data, event.id, send_callback, last_id
                    )
        except MidMessage:
            if joined.delivered:
                log.warning("resume of %s stopped mid-way: a split message", answer.last_event_id)
                return None
            raise
        except EventLogError as error:
            # What was sent is a true prefix; the client reconnects from its last id and
            # gets a verdict on that (e.g. reset/evicted) instead of a stream with a hole.
            log.warning("resume of %s stopped mid-way: %s", answer.last_event_id, error)
            return None
        return last_id


async def _send_joined(
    joined: Reassembly,
    event_type: str | None,
    data: str,
    event_id: str,
    send_callback: EventCallback,
    last_id: str,
) -> str:
    """Feed one stored event; send the message it completes. The client's id afterwards."""
    whole = joined.feed(event_type, data)
    if whole is None:
        return last_id
    message = message_adapter.validate_json(whole, by_name=False)
    await send_callback(EventMessage(message, event_id))
    return event_id


def _ends_request(stream_id: StreamId, message: JSONRPCMessage | None) -> bool:
    # A response (or error) is the last message of a request's stream; the standalone GET
    # stream has no end.
    return stream_id != GET_STREAM_KEY and isinstance(message, JSONRPCResponse | JSONRPCError)

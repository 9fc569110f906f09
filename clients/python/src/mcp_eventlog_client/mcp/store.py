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
import socket
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

import anyio
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types import ErrorData, JSONRPCError, JSONRPCMessage, JSONRPCResponse
from mcp_types import jsonrpc_message_adapter as message_adapter
from starlette.types import ASGIApp

from mcp_eventlog_client import EventLogClient, EventLogError, NewEvent, ResumeAnswer, Verdict
from mcp_eventlog_client.errors import Superseded, TerminalGeneration
from mcp_eventlog_client.mcp.names import StreamNames
from mcp_eventlog_client.mcp.scope import SessionScopeMiddleware, SessionScopes, current_scope
from mcp_eventlog_client.writer import GenerationReason

log = logging.getLogger(__name__)

RESUME_REFUSED: Final = -32010
"""JSON-RPC error code (implementation-defined range) of a refused resume."""

MESSAGE_EVENT = "message"
_NOT_THIS_SESSION = "the event id does not belong to this session"
PRIMING_EVENT = "priming"


@dataclass(slots=True)
class _Stream:
    """This process's writer state for one SDK stream of one session."""

    lock: anyio.Lock = field(default_factory=anyio.Lock)
    generation: str | None = None
    next_seq: int = 1


class EventLogEventStore(EventStore):
    """Stores an MCP server's SSE events in the event-log service, and resumes only safely.

    - Each SDK stream of each session gets a generation when this process first writes
      to it; every event is appended with `first_seq` from a local counter (so a retried
      append can never be stored twice) and its id is the service's `<token>:<seq>`.
    - Priming events (`message is None`) are stored (as SSE type `priming`) and never
      replayed as messages.
    - A request stream ends with its response: the next write to the same SDK stream id
      (a client reusing a request id) opens a new generation, so the old execution's ids
      can never be resumed into the new one.
    - `replay_events_after` asks the service for a verdict. `resume`: the missed messages
      are sent, in order, across pages. `reset` or `invalid`, or an id of another session:
      no stored event is sent, the reason is logged, None is returned, and (except on the
      standalone GET stream) the client's request is failed with a JSON-RPC error
      `RESUME_REFUSED` carrying the verdict and reason. The SDK can not tell a client to
      discard its state, and on an empty replay its client (2.3.0) never fails the call:
      it waits forever, or reconnects forever. Failing the request visibly (to be
      re-issued) is the only safe answer.

    Sessions are kept apart by `asgi_app` (see `mcp_eventlog_client.mcp.scope`): every
    service stream is named after its session's scope key. A token this process opened is
    resumed on its own stream's route, or refused without asking the service when it is another
    session's; any other token is decided by `/v1/resume` and refused unless the stream
    the service names is this session's. Either way nothing of another session is sent.

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
    ) -> None:
        self._owns_client = client is None
        self.client = client if client is not None else EventLogClient(base_url, key)
        self.producer = producer or f"mcp:{socket.gethostname()}:{os.getpid()}"
        self.max_events = max_events
        self.ttl_seconds = ttl_seconds
        self.page_limit = page_limit
        self.scopes = SessionScopes(max_sessions)
        self.names = StreamNames()
        # Bounded: a stream that never gets its response (an abandoned GET stream) would
        # otherwise stay forever. A forgotten stream's next write opens a new generation.
        self._streams: OrderedDict[tuple[str, StreamId], _Stream] = OrderedDict()
        self._max_streams = max_streams
        # Which session and SDK stream each generation this process opened belongs to, so
        # a replay is decided on its own stream's route (and another session's token is
        # refused without asking the service). Bounded like the streams; a forgotten token
        # falls back to `/v1/resume` and a check of the stream id the service names.
        self._owners: OrderedDict[str, tuple[str, StreamId]] = OrderedDict()

    def asgi_app(self, app: ASGIApp) -> ASGIApp:
        """Wrap the SDK's streamable HTTP app so every call knows its session (required)."""
        return SessionScopeMiddleware(app, self.scopes, on_shutdown=self.aclose)

    async def aclose(self) -> None:
        """Release the client's connections (if this store created the client)."""
        if self._owns_client:
            await self.client.aclose()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Append one event to the stream's generation; return its `<token>:<seq>` id."""
        scope = current_scope()
        if scope is None:
            raise RuntimeError(
                "EventLogEventStore does not know the MCP session: serve the app returned by "
                "store.asgi_app(server.streamable_http_app(event_store=store))"
            )
        key = (scope, stream_id)
        stream = self._stream(key)
        # One append at a time per stream: the local seq counter must follow append order
        # (the SDK's post-replay priming event races the session's message router).
        async with stream.lock:
            event_id = await self._append(scope, stream_id, stream, _event_of(message))
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

    async def _append(
        self, scope: str, stream_id: StreamId, stream: _Stream, event: NewEvent
    ) -> str:
        if stream.generation is None:
            await self._open(scope, stream_id, stream)
        assert stream.generation is not None
        try:
            result = await self.client.append(stream.generation, [event], first_seq=stream.next_seq)
        except (Superseded, TerminalGeneration) as fenced:
            # Someone (an operator, another writer) ended this generation: continue in a new
            # one, so the old ids reset rather than resume into different events.
            log.warning(
                "generation %s refused an append (%s); opening a new one",
                stream.generation,
                fenced.code,
            )
            await self._open(scope, stream_id, stream, reason="reset")
            assert stream.generation is not None
            result = await self.client.append(stream.generation, [event], first_seq=1)
        stream.next_seq += 1
        return result.event_ids[0]

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
        self._owners[generation.token] = (scope, stream_id)
        while len(self._owners) > self._max_streams:
            self._owners.popitem(last=False)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the messages missed after `last_event_id` if, and only if, it may resume."""
        scope = current_scope()
        if scope is None:
            log.error("replay outside SessionScopeMiddleware: refusing %r", last_event_id)
            return None
        known = self._owners.get(last_event_id.rpartition(":")[0])
        if known is not None and known[0] != scope:
            log.warning("not resuming %r: it belongs to another session", last_event_id)
            await _refuse(send_callback, Verdict.INVALID, "cross_session", _NOT_THIS_SESSION)
            return None
        service_stream = None if known is None else self.names.name(*known)
        try:
            answer = await self.client.resume(
                last_event_id, stream_id=service_stream, limit=self.page_limit
            )
        except EventLogError as error:
            log.warning("not resuming %r: the service failed (%s)", last_event_id, error)
            await _refuse(send_callback, "unavailable", error.code, error.detail)
            return None
        owner = None if answer.stream_id is None else self.names.parse(answer.stream_id)
        if owner is None or owner[0] != scope:
            await self._refuse_foreign(answer, send_callback)
            return None
        sdk_stream = owner[1]
        if answer.verdict is not Verdict.RESUME:
            log.info(
                "not resuming %r: %s/%s (%s)",
                last_event_id,
                answer.verdict,
                answer.reason,
                answer.detail,
            )
            if sdk_stream != GET_STREAM_KEY:
                await _refuse(send_callback, answer.verdict, answer.reason, answer.detail)
            return None
        if not await self._send_missed(answer, send_callback):
            return None
        return sdk_stream

    async def _refuse_foreign(self, answer: ResumeAnswer, send_callback: EventCallback) -> None:
        """Refuse an id whose stream is not one of this session's."""
        if answer.stream_id is None:
            # The service itself found no stream (malformed id, unknown token): `invalid`.
            log.info(
                "not resuming %r: %s/%s (%s)",
                answer.last_event_id,
                answer.verdict,
                answer.reason,
                answer.detail,
            )
            await _refuse(send_callback, answer.verdict, answer.reason, answer.detail)
            return
        # A real token of another session (or of a stream not written by this store):
        # whatever the service's verdict, this session may not see it.
        log.warning("not resuming %r: it belongs to another session", answer.last_event_id)
        await _refuse(send_callback, Verdict.INVALID, "cross_session", _NOT_THIS_SESSION)

    async def _send_missed(self, answer: ResumeAnswer, send_callback: EventCallback) -> bool:
        """Send the resumed events (never priming ones); False if paging failed mid-way."""
        assert answer.generation is not None
        for event in answer.events:
            await _send_stored(event.event, event.data, event.id, send_callback)
        if answer.next_after is None:
            return True
        try:
            async for event in self.client.events_after(
                answer.generation, answer.next_after, limit=self.page_limit
            ):
                await _send_stored(event.event, event.data, event.id, send_callback)
        except EventLogError as error:
            # What was sent is a true prefix; the client reconnects from its last id and
            # gets a verdict on that (e.g. reset/evicted) instead of a stream with a hole.
            log.warning("resume of %s stopped mid-way: %s", answer.last_event_id, error)
            return False
        return True


def _ends_request(stream_id: StreamId, message: JSONRPCMessage | None) -> bool:
    # A response (or error) is the last message of a request's stream; the standalone GET
    # stream has no end.
    return stream_id != GET_STREAM_KEY and isinstance(message, JSONRPCResponse | JSONRPCError)


def _event_of(message: JSONRPCMessage | None) -> NewEvent:
    if message is None:
        return NewEvent(data="", event=PRIMING_EVENT)
    return NewEvent(
        data=message.model_dump_json(by_alias=True, exclude_unset=True), event=MESSAGE_EVENT
    )


async def _send_stored(
    event_type: str | None, data: str, event_id: str, send_callback: EventCallback
) -> None:
    if event_type == PRIMING_EVENT:
        return
    message = message_adapter.validate_json(data, by_name=False)
    await send_callback(EventMessage(message, event_id))


async def _refuse(send_callback: EventCallback, verdict: str, reason: str, detail: str) -> None:
    """Fail the client's request: an unstored error event (no id), never a stored message."""
    error = ErrorData(
        code=RESUME_REFUSED,
        message=f"cannot resume ({verdict}: {reason}); discard partial output and re-issue",
        data={"verdict": str(verdict), "reason": reason, "detail": detail},
    )
    await send_callback(EventMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error)))

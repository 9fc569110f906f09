"""Live reads: follow a stream as it is written (`GET /v1/streams/{id}/live`, SSE).

`EventLogClient.follow` yields what the service sends, typed:

- `LiveEvent`: a stored event, with its id `<token>:<seq>`;
- `LiveReset`: refuse to splice: discard what was read of the stream so far; the events
  that follow are a fresh generation from seq 1 (`generation`, when the service names it);
- `LiveEnd`: the followed generation is terminal and all of it was delivered; the
  iteration ends.

The service ends a connection after `EVENTLOG_LIVE_MAX_SECONDS` ("SSE polling"); the
follower then reconnects with its last id after the `retry:` the service asked for, and
goes on exactly where it was. A dropped or silent connection (nothing, not even a
keep-alive, for `idle_timeout` seconds) is reconnected with backoff. Events are parsed by
`httpx-sse`, a real SSE parser, fed at most `max_response_bytes` characters between two
events (an endless line is cut there, `ResponseTooLarge`); a frame that is not what the
contract sends (an id that is not `<token>:<seq>`, a control event whose data is not its
JSON) is a `MalformedResponse`. Both end the iteration: a service that sends them is not
one to reconnect to.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import anyio
import httpx
from httpx_sse import EventSource, ServerSentEvent

from mcp_eventlog_client.connection import RetryPolicy, ServiceConnection
from mcp_eventlog_client.errors import (
    EventLogError,
    MalformedResponse,
    ResponseTooLarge,
    ServiceUnreachable,
)


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """A stored event as it is delivered live.

    `event` is the SSE type: `"message"` when the stored type was null or `message`.
    """

    id: str
    generation: str
    seq: int
    event: str
    data: str


@dataclass(frozen=True, slots=True)
class LiveReset:
    """Refuse to splice: discard the stream's partial state; a fresh generation follows.

    `generation` is the one delivered next from seq 1, or None when the service waits for
    the stream's next generation to be opened. `reason` is the verdict's reason
    (`superseded`, `evicted`, `expired`, `eviction_hole`, `terminal`).
    """

    reason: str
    generation: str | None
    discard_client_state: bool = True


@dataclass(frozen=True, slots=True)
class LiveEnd:
    """The followed generation is terminal and every event of it was delivered."""

    generation: str
    terminal_seq: int


LiveItem = LiveEvent | LiveReset | LiveEnd

CONTROL_EVENTS = frozenset({"reset", "end"})


def _is_control(sse: ServerSentEvent, previous_id: str) -> bool:
    # A control event has no `id:` line, so the parser reports the id of the event before
    # it (or "" on a fresh connection); a stored event always carries an id of its own,
    # never the previous one (seqs grow), even when its stored type is `reset` or `end`.
    return sse.event in CONTROL_EVENTS and sse.id == previous_id


_EVENT_ID = re.compile(r"([A-Za-z0-9_-]+):(0|[1-9][0-9]{0,17})")


def _malformed(sse: ServerSentEvent, why: str) -> MalformedResponse:
    detail = f"a live frame (event {sse.event!r}, id {sse.id[:80]!r}) {why}"
    return MalformedResponse(200, MalformedResponse.code, detail)


def _live_event(sse: ServerSentEvent) -> LiveEvent:
    parts = _EVENT_ID.fullmatch(sse.id)
    if parts is None:
        raise _malformed(sse, "has no <token>:<seq> id")
    token, seq = parts.group(1), int(parts.group(2))
    return LiveEvent(id=sse.id, generation=token, seq=seq, event=sse.event, data=sse.data)


def _control(sse: ServerSentEvent) -> LiveReset | LiveEnd:
    try:
        body: Any = json.loads(sse.data)
        if sse.event == "end":
            generation, terminal_seq = body["generation"], body["terminal_seq"]
            if isinstance(generation, str) and type(terminal_seq) is int:
                return LiveEnd(generation=generation, terminal_seq=terminal_seq)
        else:
            reason, generation = body["reason"], body.get("generation")
            if isinstance(reason, str) and isinstance(generation, str | None):
                return LiveReset(reason=reason, generation=generation)
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    raise _malformed(sse, "is not the control event's JSON")


class _CappedText:
    """A live response as `EventSource` reads it, with at most `cap` characters between
    two events: the SSE parser buffers a line (and an event) until it ends, so a service
    that never ends one would otherwise grow it without bound."""

    def __init__(self, response: httpx.Response, cap: int) -> None:
        self.headers = response.headers
        self._response = response
        self._cap = cap
        self.since_event = 0

    async def aiter_text(self) -> AsyncIterator[str]:
        try:
            async for text in self._response.aiter_text():
                self.since_event += len(text)
                if self.since_event > self._cap:
                    detail = f"no SSE event ended within {self._cap} characters"
                    raise ResponseTooLarge(200, ResponseTooLarge.code, detail)
                yield text
        except httpx.DecodingError as error:
            raise MalformedResponse(200, MalformedResponse.code, str(error)) from error


@dataclass(slots=True)
class _Position:
    """Where a follower is: the id to reconnect with, and the service's `retry:`."""

    last_id: str | None
    retry_ms: int = 1000
    # A reset that names no generation is sent again by every reconnection until the next
    # generation opens; the reader has already been told.
    unresolved_reset: LiveReset | None = None


class Follower:
    """One `follow`: connects, parses, reconnects; see `EventLogClient.follow`."""

    def __init__(
        self,
        connection: ServiceConnection,
        stream_id: str,
        last_event_id: str | None,
        *,
        retry: RetryPolicy | None,
        idle_timeout: float,
    ) -> None:
        self._connection = connection
        self._path = f"/v1/streams/{quote(stream_id, safe='')}/live"
        self._position = _Position(last_event_id or None)
        self._retry = retry or connection.retry
        self._idle_timeout = idle_timeout

    async def items(self) -> AsyncGenerator[LiveItem]:
        """Every event and control event, across connections, until `end`."""
        failures = 0
        while True:
            try:
                # Closed at once however the loop is left (`end`, an error, the caller
                # breaking out), so the connection is never left to the garbage collector.
                async with aclosing(self._connect()) as connection:
                    async for item in connection:
                        failures = 0
                        yield item
                        if isinstance(item, LiveEnd):
                            return
            except (ServiceUnreachable, httpx.TransportError) as error:
                failures += 1
                if failures >= self._retry.attempts:
                    raise _as_unreachable(error) from error
                await anyio.sleep(self._retry.delay(failures - 1))
                continue
            except EventLogError as refusal:
                if refusal.status < 500:
                    raise
                failures += 1
                if failures >= self._retry.attempts:
                    raise
                await anyio.sleep(self._retry.delay(failures - 1, refusal.retry_after))
                continue
            # The service ended the connection (its lifetime is bounded): come back as asked.
            failures = 0
            await anyio.sleep(self._position.retry_ms / 1000)

    async def _connect(self) -> AsyncGenerator[LiveItem]:
        position = self._position
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
        if position.last_id:
            headers["Last-Event-ID"] = position.last_id
        async with self._connection.stream(
            self._path, headers=headers, attempt_timeout=self._idle_timeout
        ) as response:
            previous_id = ""
            text = _CappedText(response, self._connection.max_response_bytes)
            source = EventSource(cast(httpx.Response, text))
            async with aclosing(source.aiter_sse()) as events:
                async for sse in events:
                    text.since_event = 0
                    if sse.retry is not None:
                        position.retry_ms = sse.retry
                    if _is_control(sse, previous_id):
                        item = _control(sse)
                        if isinstance(item, LiveReset):
                            if item == position.unresolved_reset:
                                continue
                            # A named generation is followed from seq 1 on any reconnection.
                            if item.generation is not None:
                                position.last_id = f"{item.generation}:0"
                            position.unresolved_reset = item if item.generation is None else None
                        yield item
                        continue
                    previous_id = sse.id
                    event = _live_event(sse)
                    position.last_id, position.unresolved_reset = event.id, None
                    yield event


def _as_unreachable(error: Exception) -> EventLogError:
    if isinstance(error, EventLogError):
        return error
    return ServiceUnreachable(0, ServiceUnreachable.code, str(error) or type(error).__name__)

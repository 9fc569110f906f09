"""One recorded SSE response: read from the upstream to its end, stored, relayed.

A `Recording` reads the upstream's events in a task of its own (the client leaving does
not stop it), hands each message to the `Recorder` (stored *before* it is relayed) and
to the client's `Backlog` (`app.gateway.relay`: bounded memory, the log for a client that
falls behind), which sends it with the id it was stored under. The upstream's own ids are never
shown; its priming events (no data) are not relayed. For a 2025-11-25 session the gateway
sends its own priming event (stored, an id, empty data) first; the response that carries
`relay()` starts with the gateway's `retry:` (`app.api.routes.live.EventStreamResponse`).

A POST's generation is terminal once the responses to all its requests (a batch has
several; ids compared as JSON values, `messages.same_id`) are stored. When the upstream's
stream ends before that: if the upstream gave event ids, the gateway reconnects to it
(`GET` with its last id, after its `retry:` capped at `EVENTLOG_GATEWAY_MAX_RETRY_MS`);
a reconnect that brings no message (refused, answered non-200 or not SSE, or a stream of
priming events only) is fruitless, and after `EVENTLOG_GATEWAY_RECONNECTS` fruitless ones
in a row — or at once when there is no id to reconnect with — it stores, for each request
still unanswered, a JSON-RPC error (`-32011`, `upstream_lost`), the last one terminal. So
a call that stops hearing from its upstream ends within `reconnects` times (the capped retry +
one reconnect, which the connect or read timeout bounds) of the upstream's last message.

A recording that ends with its generation spoiled (the log was away for its last batch)
fences it before the task ends (`Recorder.fence`), so no resume of it waits forever.

The standalone GET stream has no response to wait for: its recording ends when the
upstream ends it or when its client leaves, and its generation is then made terminal.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import httpx

from app.domain.append import EventBody
from app.errors import UpstreamUnavailable
from app.event_stream import event_text
from app.gateway import messages, sse
from app.gateway.recorder import Recorder
from app.gateway.relay import Backlog, RelayCut, Relayed
from app.gateway.upstream import Upstream, decodable

log = logging.getLogger(__name__)


# At most this many messages wait for their commit before the upstream is read on (with
# 4 KiB messages, 4 MiB): an upstream faster than the log is paced by it.
PENDING_MESSAGES = 1000


@dataclass(frozen=True, slots=True)
class RecordingLimits:
    """The bounds every recording of one gateway keeps (its settings, read once)."""

    max_event: int
    """Characters of one upstream SSE event or line (`EVENTLOG_GATEWAY_MAX_EVENT_BYTES`)."""
    reconnects: int
    """Fruitless reconnects in a row before the call is lost (`EVENTLOG_GATEWAY_RECONNECTS`)."""
    max_retry_ms: int
    """The cap on an upstream's `retry:` (`EVENTLOG_GATEWAY_MAX_RETRY_MS`)."""
    max_event_bytes: int
    """UTF-8 bytes of one stored event: longer messages are split (`EVENTLOG_MAX_EVENT_BYTES`)."""
    fence_seconds: float
    """How long a spoiled generation is retried fencing (`EVENTLOG_GATEWAY_FENCE_SECONDS`)."""


class Recording:
    """One upstream SSE response being recorded (see the module)."""

    def __init__(
        self,
        *,
        upstream: Upstream,
        response: httpx.Response,
        recorder: Recorder,
        request_ids: Sequence[object],
        reconnect_headers: Sequence[tuple[str, str]],
        prime: bool,
        limits: RecordingLimits,
        on_lost: Callable[[str], None],
        backlog: Backlog,
    ) -> None:
        self._upstream = upstream
        self._response = response
        self.recorder = recorder
        # The POST's requests (a batch has several) in the order sent; none: the
        # standalone GET stream. The stream is named and relayed by the first.
        self._request_id = request_ids[0] if request_ids else None
        self._unanswered = list(request_ids)
        self._reconnect_headers = list(reconnect_headers)
        self._prime = prime
        self._limits = limits
        self._on_lost = on_lost
        self._backlog = backlog  # what the client is yet to be sent (`app.gateway.relay`)
        self.answered = False
        self.task: asyncio.Task[None] | None = None

    @property
    def standalone(self) -> bool:
        """Whether this is the standalone GET stream (no request: it never ends by itself)."""
        return self._request_id is None

    def start(self) -> None:
        """Begin reading the upstream (in a task that outlives the client's connection)."""
        self.task = asyncio.create_task(self._run(), name=f"recording {self.recorder.stream_id}")

    async def relay(self) -> AsyncGenerator[bytes]:
        """What the client is sent, as it is stored; ends with the upstream's response.

        Held in bounded memory, read back from the log for a client that falls behind
        (`app.gateway.relay`). A client that cannot be sent the rest gets the `-32010`
        `reset` error for its request there (the standalone stream just ends: no request
        waits on it, and its reconnect is decided like any other).
        """
        try:
            async with contextlib.aclosing(self._backlog.bodies()) as bodies:
                async for body in bodies:
                    yield body
        except RelayCut as cut:
            if self._request_id is not None:
                refusal = messages.refusal(
                    self._request_id, "reset", cut.reason, cut.detail, known=True
                )
                yield event_text(refusal).encode()
        finally:
            self._backlog.close()
            if self._request_id is None and self.task is not None and not self.task.done():
                # The standalone stream has no end of its own: nobody left to read it.
                self.task.cancel()

    def _send(self, bodies: Sequence[EventBody], data: str | None, *, terminal: bool) -> None:
        stored = self.recorder.submit(bodies, terminal=terminal)
        self._backlog.put(Relayed(stored, "" if data is None else data, len(bodies)))

    async def _run(self) -> None:
        shut_down = False
        try:
            if self._prime:
                self._send([messages.priming_body()], None, terminal=False)
            await self._read_all()
        except asyncio.CancelledError:
            shut_down = True
            await asyncio.shield(self._lose("the gateway shut down before the upstream answered"))
            raise
        except Exception as error:  # the client must hear of it, not hang
            log.exception("recording %s failed", self.recorder.stream_id)
            await self._lose(f"the gateway failed reading the upstream: {type(error).__name__}")
        finally:
            if self._request_id is None:
                self._send_end()
            await self.recorder.drain()
            self._backlog.end()
            # The client has its answer; a generation left spoiled is fenced (in the log).
            # (On shutdown, one attempt: a log still away must not hold the exit.)
            await self.recorder.fence(0 if shut_down else self._limits.fence_seconds)

    async def _read_all(self) -> None:
        cursor = _Cursor()
        await self._read(self._response, cursor)
        fruitless = 0
        while not self.answered and self._request_id is not None:
            if cursor.last_id is None or fruitless >= self._limits.reconnects:
                await self._lose(_why_lost(cursor, fruitless))
                return
            retry_ms = 1000 if cursor.retry_ms is None else cursor.retry_ms
            await asyncio.sleep(min(retry_ms, self._limits.max_retry_ms) / 1000)
            response = await self._reconnect(cursor)
            brought = 0 if response is None else await self._read(response, cursor)
            # Only a reconnect that brought a message is progress: ids, priming events and
            # refusals are not, so an upstream that never answers is given up on after
            # `reconnects` fruitless attempts in a row.
            fruitless = 0 if brought else fruitless + 1

    async def _read(self, response: httpx.Response, cursor: _Cursor) -> int:
        """Record `response`'s messages until it ends or the request is answered; how many."""
        messages_read = 0
        try:
            async for event in self._events(response):
                if event.retry is not None:
                    cursor.retry_ms = event.retry
                if event.id:
                    cursor.last_id = event.id
                if event.data is None or event.data == "":
                    continue  # the upstream's priming or keep-alive: not a message
                messages_read += 1
                self._message(event.data)
                await self.recorder.room(PENDING_MESSAGES)
                if self.answered:
                    break
        except (httpx.HTTPError, sse.SseTooLarge) as error:
            self._on_lost(type(error).__name__)
            cursor.failure = f"the stream broke: {type(error).__name__}"
            log.warning("upstream stream of %s broke: %r", self.recorder.stream_id, error)
        else:
            cursor.failure = "the stream ended"
        finally:
            await response.aclose()
        return messages_read

    async def _reconnect(self, cursor: _Cursor) -> httpx.Response | None:
        assert cursor.last_id is not None
        try:
            response = await self._upstream.open(
                "GET", self._reconnect_headers, last_event_id=cursor.last_id
            )
        except UpstreamUnavailable:
            cursor.failure = "the reconnect was refused"
            return None
        content_type = response.headers.get("content-type", "")
        if (
            response.status_code != 200
            or not content_type.startswith("text/event-stream")
            or not decodable(response.headers)
        ):
            cursor.failure = f"the reconnect was answered {response.status_code} {content_type}"
            await response.aclose()
            return None
        return response

    async def _events(self, response: httpx.Response) -> AsyncIterator[sse.SseEvent]:
        parser = sse.SseParser(self._limits.max_event)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        async for chunk in response.aiter_bytes():  # decoded: the endpoint saw to it
            for event in parser.feed(decoder.decode(chunk)):
                yield event

    def _message(self, data: str) -> None:
        message = messages.inspect(data)
        answers = message is not None and message.is_response and self._settle(message.id)
        bodies = messages.bodies_of(data, self._limits.max_event_bytes)
        # The generation is terminal with the answer to the last of the POST's requests.
        terminal = answers and not self._unanswered
        self._send(bodies, data, terminal=terminal)
        if terminal:
            self.answered = True

    def _settle(self, response_id: object) -> bool:
        """Whether `response_id` answers one of the requests still unanswered (now settled)."""
        for index, request_id in enumerate(self._unanswered):
            if messages.same_id(request_id, response_id):
                del self._unanswered[index]
                return True
        return False

    def _send_end(self) -> None:
        """The standalone stream ended (or its client left): its generation is finished,
        so its live readers end too."""
        if self.recorder.token is not None and not self.recorder.terminal:
            self.recorder.submit([], terminal=True)

    async def _lose(self, detail: str) -> None:
        """Every request of the POST still unanswered gets the `-32011` error (the last
        one's is the generation's terminal event)."""
        if self.answered or self.recorder.terminal or self._request_id is None:
            return
        self.answered = True
        self._on_lost(detail)
        unanswered, self._unanswered = self._unanswered, []
        for index, request_id in enumerate(unanswered, start=1):
            data = messages.upstream_lost(request_id, detail)
            bodies = messages.bodies_of(data, self._limits.max_event_bytes)
            self._send(bodies, data, terminal=index == len(unanswered))
        await self.recorder.drain()


@dataclass(slots=True)
class _Cursor:
    """Where the upstream's stream of one request stands: its last event id, its `retry:`
    and how its last stream or reconnect ended."""

    last_id: str | None = None
    retry_ms: int | None = None
    failure: str = ""


def _why_lost(cursor: _Cursor, fruitless: int) -> str:
    if cursor.last_id is None:
        return f"the upstream's stream ended before its response ({cursor.failure}, no event id)"
    return (
        f"the upstream's stream ended before its response ({fruitless} reconnects brought "
        f"nothing; last: {cursor.failure})"
    )

"""One recorded SSE response: read from the upstream to its end, stored, relayed.

A `Recording` reads the upstream's events in a task of its own (the client leaving does
not stop it), hands each message to the `Recorder` (stored *before* it is relayed) and
to the client's `Backlog` (`app.gateway.relay`: bounded memory, the log for a client that
falls behind), which sends it with the id it was stored under. The upstream's own ids are never
shown; its priming events (no data) are not relayed. For a 2025-11-25 session the gateway
sends its own priming event (stored, an id, empty data) first; the response that carries
`relay()` starts with the gateway's `retry:` (`app.api.live.EventStreamResponse`).

A POST's generation is terminal once the response to its request is stored. When the
upstream's stream ends before that response: if the upstream gave event ids, the gateway
reconnects to it (`GET` with its last id, after its `retry:`), up to
`EVENTLOG_GATEWAY_RECONNECTS` times; otherwise (or once those are spent) it stores, as the
terminal event, a JSON-RPC error for the request (`-32011`, `upstream_lost`).

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

import httpx

from app.domain.append import EventBody
from app.errors import UpstreamUnavailable
from app.gateway import messages, sse
from app.gateway.recorder import Recorder
from app.gateway.relay import Backlog, RelayCut, Relayed
from app.gateway.upstream import Upstream

log = logging.getLogger(__name__)


class Recording:
    """One upstream SSE response being recorded (see the module)."""

    def __init__(
        self,
        *,
        upstream: Upstream,
        response: httpx.Response,
        recorder: Recorder,
        request_id: object | None,
        reconnect_headers: Sequence[tuple[str, str]],
        prime: bool,
        max_event: int,
        reconnects: int,
        max_event_bytes: int,
        fence_seconds: float,
        on_lost: Callable[[str], None],
        backlog: Backlog,
    ) -> None:
        self._upstream = upstream
        self._response = response
        self.recorder = recorder
        self._request_id = request_id
        self._reconnect_headers = list(reconnect_headers)
        self._prime = prime
        self._max_event = max_event
        self._reconnects = reconnects
        self._max_event_bytes = max_event_bytes
        self._fence_seconds = fence_seconds
        self._on_lost = on_lost
        self._backlog = backlog  # what the client is yet to be sent (`app.gateway.relay`)
        self.answered = False
        self.task: asyncio.Task[None] | None = None

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
                yield sse.encode(
                    messages.refusal(self._request_id, "reset", cut.reason, cut.detail, known=True)
                )
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
            await self.recorder.fence(0 if shut_down else self._fence_seconds)

    async def _read_all(self) -> None:
        response: httpx.Response | None = self._response
        last_id: str | None = None
        retry_ms: int | None = None
        attempts = 0
        while response is not None:
            try:
                async for event in self._events(response):
                    if event.retry is not None:
                        retry_ms = event.retry
                    if event.id:
                        last_id = event.id
                        attempts = 0
                    if event.data is None or event.data == "":
                        continue  # the upstream's priming or keep-alive: not a message
                    self._message(event.data)
                    if self.answered:
                        break
            except (httpx.HTTPError, sse.SseTooLarge) as error:
                self._on_lost(type(error).__name__)
                log.warning("upstream stream of %s broke: %r", self.recorder.stream_id, error)
            finally:
                await response.aclose()
            response = None
            if self.answered or self._request_id is None:
                return
            if last_id is None or attempts >= self._reconnects:
                await self._lose(
                    "the upstream's stream ended before its response"
                    + ("" if last_id is None else f" ({attempts} reconnects failed)")
                )
                return
            attempts += 1
            await asyncio.sleep((retry_ms if retry_ms is not None else 1000) / 1000)
            response = await self._reconnect(last_id)

    async def _reconnect(self, last_id: str) -> httpx.Response | None:
        try:
            response = await self._upstream.open(
                "GET", self._reconnect_headers, last_event_id=last_id
            )
        except UpstreamUnavailable:
            return None
        content_type = response.headers.get("content-type", "")
        if response.status_code != 200 or not content_type.startswith("text/event-stream"):
            await response.aclose()
            return None
        return response

    async def _events(self, response: httpx.Response) -> AsyncIterator[sse.SseEvent]:
        parser = sse.SseParser(self._max_event)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        async for chunk in response.aiter_raw():
            for event in parser.feed(decoder.decode(chunk)):
                yield event

    def _message(self, data: str) -> None:
        message = messages.inspect(data)
        answers = (
            message is not None
            and message.is_response
            and self._request_id is not None
            and message.id == self._request_id
        )
        bodies = messages.bodies_of(data, self._max_event_bytes)
        self._send(bodies, data, terminal=answers)
        if answers:
            self.answered = True

    def _send_end(self) -> None:
        """The standalone stream ended (or its client left): its generation is finished,
        so its live readers end too."""
        if self.recorder.token is not None and not self.recorder.terminal:
            self.recorder.submit([], terminal=True)

    async def _lose(self, detail: str) -> None:
        if self.answered or self.recorder.terminal or self._request_id is None:
            return
        self.answered = True
        self._on_lost(detail)
        data = messages.upstream_lost(self._request_id, detail)
        self._send(messages.bodies_of(data, self._max_event_bytes), data, terminal=True)
        await self.recorder.drain()

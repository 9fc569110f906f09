"""Lightweight live readers for the load, replica and chaos tests.

Each reader is one raw asyncio connection to `GET /v1/streams/{id}/live` on 127.0.0.1, a
chunked-body decoder and a small SSE parser — no HTTP client library — so a thousand of
them fit in one test process. A reader behaves like an EventSource when asked to
(`reconnect=True`): when the service ends the connection, or refuses it for a while
(503), it connects again after the `retry:` interval with its last event id; it stops on
`end`, on an `invalid` refusal (4xx), or when told.

Everything a reader parsed stays in `events`, in order; a test waits on a condition over
them (`wait_until`) with a deadline instead of sleeping.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import re
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import uvicorn
from starlette.types import ASGIApp

from tests.support.processes import free_port

WAIT = 30.0  # seconds: generous, the machine is shared
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: `id` is this event's own `id:` line (None without one)."""

    id: str | None
    event: str  # "message" when the event had no `event:` line
    data: str

    def control(self) -> dict[str, Any]:
        """The JSON data of a control event (`reset`, `end`)."""
        data: dict[str, Any] = json.loads(self.data)
        return data

    @property
    def token(self) -> str:
        """The generation of a data event."""
        assert self.id is not None
        return self.id.rsplit(":", 1)[0]

    @property
    def seq(self) -> int:
        """The seq of a data event."""
        assert self.id is not None
        return int(self.id.rsplit(":", 1)[1])


class SseParser:
    """The event-stream rules of the HTML standard that a live read can exercise.

    Lines end at CR, LF or CRLF (a CR at the end of a chunk waits for the next one);
    `data:` lines are joined with LF; a blank line dispatches (nothing, when no data line
    came); a line starting with `:` is a comment (the heartbeat); one space after the
    colon is dropped.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._pending = ""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self.comments = 0
        self.retry: int | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by `chunk`."""
        text = self._pending + self._decoder.decode(chunk)
        held = ""
        if text.endswith("\r"):  # maybe the first half of a CRLF: decide with the next chunk
            text, held = text[:-1], "\r"
        lines = _LINE_END.split(text)
        self._pending = lines.pop() + held
        out: list[SseEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                out.append(event)
        return out

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        data, event, event_id = self._data, self._event, self._id
        self._data, self._event, self._id = [], "", None
        if not data:
            return None
        return SseEvent(event_id, event or "message", "\n".join(data))


class Refused(Exception):
    """The service answered the live request with an error status (problem+json)."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"{status}: {body[:300]!r}")
        self.status = status
        self.body = body

    def problem(self) -> dict[str, Any]:
        """The problem+json body."""
        answer: dict[str, Any] = json.loads(self.body)
        return answer


def live_request(host: str, stream_id: str, last_event_id: str | None) -> bytes:
    """The bytes of a live request (HTTP/1.1, one request per connection)."""
    lines = [
        f"GET /v1/streams/{quote(stream_id, safe='')}/live HTTP/1.1",
        f"Host: {host}",
        "Accept: text/event-stream",
        "Connection: close",
    ]
    if last_event_id is not None:
        lines.append(f"Last-Event-ID: {last_event_id}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _head(stream: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await stream.readline()
    if not status_line:
        raise ConnectionResetError("closed before an answer")
    status = int(status_line.split(b" ", 2)[1])
    headers: dict[str, str] = {}
    while (line := await stream.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def _chunks(stream: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The decoded chunks of a `transfer-encoding: chunked` body, until its last chunk."""
    while True:
        size_line = await stream.readline()
        if not size_line:
            raise ConnectionResetError("the body ended without its last chunk")
        size = int(size_line.split(b";", 1)[0], 16)
        if size == 0:
            await stream.readline()
            return
        chunk = await stream.readexactly(size)
        await stream.readexactly(2)
        yield chunk


@dataclass
class LiveReader:
    """One live reader of `stream_id` on the service at `base_url` (run it with `start`)."""

    base_url: str
    stream_id: str
    last_id: str | None = None  # what the next connection claims (an EventSource's lastEventId)
    reconnect: bool = False
    on_event: Callable[[SseEvent], None] | None = None
    on_connect: Callable[[str | None], None] | None = None  # told each claim it sends
    events: list[SseEvent] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    refusals: list[Refused] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    comments: int = 0
    retry_ms: int = 250
    drop_after: Callable[[], float] | None = None  # a connection is dropped after this (s)
    drops: int = 0
    ended: bool = False  # `end` received, refused as invalid, or stopped
    _progress: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    def start(self) -> LiveReader:
        """Run in a task (stop with `stop`)."""
        self._task = asyncio.create_task(self._run(), name=f"live-reader-{self.stream_id}")
        return self

    async def stop(self) -> None:
        """Close the connection and end the task."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.ended = True
        self._progress.set()

    async def wait_until(
        self, condition: Callable[[LiveReader], bool], within: float = WAIT
    ) -> None:
        """Return once `condition(self)` holds; TimeoutError after `within` seconds."""
        async with asyncio.timeout(within):
            while not condition(self):
                self._progress.clear()
                await self._progress.wait()

    def data(self) -> list[SseEvent]:
        """The data events (those with an id), in order."""
        return [e for e in self.events if e.id is not None]

    async def _run(self) -> None:
        try:
            while True:
                try:
                    await self._connect_once()
                except Refused as refused:
                    self.refusals.append(refused)
                    if refused.status != 503:
                        return
                except (OSError, asyncio.IncompleteReadError, ValueError) as error:
                    self.errors.append(repr(error))
                if self.ended or not self.reconnect:
                    return
                await asyncio.sleep(self.retry_ms / 1000)  # an EventSource's reconnection delay
        finally:
            self.ended = True
            self._progress.set()

    def adopt(self, stream: asyncio.StreamReader, writer: asyncio.StreamWriter) -> LiveReader:
        """Read the answer to a live request already sent on this connection (in a task)."""
        self._task = asyncio.create_task(self._adopted(stream, writer))
        return self

    async def _adopted(self, stream: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._exchange(stream, writer, sent=True)
        except (Refused, OSError, asyncio.IncompleteReadError, ValueError) as error:
            self.errors.append(repr(error))
        finally:
            self.ended = True
            self._progress.set()

    async def _connect_once(self) -> None:
        url = urlsplit(self.base_url)
        assert url.hostname is not None
        assert url.port is not None
        stream, writer = await asyncio.open_connection(url.hostname, url.port)
        if self.drop_after is None:
            await self._exchange(stream, writer, sent=False)
            return
        try:  # a reader whose connection breaks at random: it reconnects with its last id
            async with asyncio.timeout(self.drop_after()):
                await self._exchange(stream, writer, sent=False)
        except TimeoutError:
            self.drops += 1

    async def _exchange(
        self, stream: asyncio.StreamReader, writer: asyncio.StreamWriter, *, sent: bool
    ) -> None:
        try:
            if not sent:
                if self.on_connect is not None:
                    self.on_connect(self.last_id)
                writer.write(live_request(self._netloc, self.stream_id, self.last_id))
            status, headers = await _head(stream)
            self.statuses.append(status)
            self._progress.set()
            if status != 200:
                body = await stream.readexactly(int(headers.get("content-length", "0")))
                raise Refused(status, body)
            await self._read(stream)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    @property
    def _netloc(self) -> str:
        return urlsplit(self.base_url).netloc

    async def _read(self, stream: asyncio.StreamReader) -> None:
        parser = SseParser()
        try:
            async for chunk in _chunks(stream):
                for event in parser.feed(chunk):
                    self._take(event)
                    if event.event == "end":
                        self.ended = True
                        return
                if parser.comments != self.comments:
                    self.comments = parser.comments
                    self._progress.set()
        finally:
            if parser.retry is not None:
                self.retry_ms = parser.retry

    def _take(self, event: SseEvent) -> None:
        self.events.append(event)
        if event.id is not None:
            self.last_id = event.id
        if self.on_event is not None:
            self.on_event(event)
        self._progress.set()


def stalled_socket(base_url: str, stream_id: str, *, receive_buffer: int = 4096) -> socket.socket:
    """A connected live request whose socket is never read (a reader that stopped reading).

    Its receive buffer is made small before connecting, so the service's writes to it
    back up almost at once.
    """
    url = urlsplit(base_url)
    assert url.hostname is not None
    assert url.port is not None
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect((url.hostname, url.port))
    sock.sendall(live_request(url.netloc, stream_id, None))
    return sock


async def metric(base_url: str, name: str) -> float:
    """One unlabelled metric of the service at `base_url`, from `/metrics`."""
    async with httpx.AsyncClient(base_url=base_url, timeout=WAIT) as http:
        text = (await http.get("/metrics")).text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert found is not None, f"no {name} in /metrics"
    return float(found.group(1))


async def metric_reaches(base_url: str, name: str, value: float, within: float = WAIT) -> None:
    """Wait until the metric equals `value` (another process's: asked until it agrees)."""
    async with asyncio.timeout(within):
        while await metric(base_url, name) != value:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


@asynccontextmanager
async def serving(app: ASGIApp) -> AsyncIterator[str]:
    """Serve an app (its lifespan already started) on a free loopback port in this event
    loop, for readers that need a real socket (httpx's ASGI transport buffers a response
    whole, so it cannot follow a live read); yields the base URL. Close live readers first:
    the server waits for open connections when it stops (at most 5 s)."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=free_port(),
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(WAIT):
            while not server.started:
                if task.done():
                    task.result()  # raises what stopped it
                await asyncio.sleep(0.01)  # uvicorn offers no event to await
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        await task

"""What a connection may take before it is a request at all: uvicorn's one adapter.

uvicorn's httptools protocol reads a request's head with no bound: a header that never
ends grows the process by as much as the caller sends, and a connection that sends half a
head, or nothing, stays open for good, all before any key is checked. No public option of
uvicorn bounds that, and no ASGI middleware can, since the app is called only once a head
is whole: `h11_max_incomplete_event_size` applies to the h11 protocol alone (whose answer
is a bare 400), `limit_concurrency` answers a plain-text 503 once a head was read, and
`timeout_keep_alive` times only the idle gap between requests. So
this module is the one place that subclasses uvicorn's private `HttpToolsProtocol`, with
four checks in front of its parser:

- the head (request line and headers) is at most `max_header_bytes`: past it the parser
  is fed no more, the answer is 431 `headers_too_large` and the connection closes;
- at most `max_headers` header lines: past it, 431 `headers_too_large` too;
- a head must be complete within `header_timeout` of the connection's opening (or of its
  first byte, after a kept-alive request): past it, 408 `header_timeout` when part of a
  head came, a plain close when nothing did (idle kept-alive connections are closed by
  uvicorn's keep-alive timeout);
- at most `max_connections` connections per process: one more is answered 503
  `too_many_connections` and closed at once.

The answers are rows of `PROBLEM_CODES`, rendered by `problem` and written straight on the
transport (the app never sees these requests: no route, no key, no access line).

uvicorn is given the class by name (`app/cli.py`) and builds one per connection with the
server's lifespan state (`app_state`); the limits come from the app's settings through
that state: `SharedConnectionLimits`, a piece of the front door, puts them there at
startup. What the class relies on of uvicorn (the constructor's arguments, the members it
calls, `data_received`'s body, which `_feed` repeats) is checked against the pinned
version by `tests/api/frontdoor/test_connections.py`.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any

import httptools
from pydantic import Field
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.api.problems import problem
from app.errors import NotAdmitted
from app.settings.slices import Slice

# The key of the lifespan state under which the app hands the protocol its limits.
LIMITS_KEY = "eventlog.connection_limits"


class ConnectionLimits(Slice):
    """The bounds of one connection's request heads, and of the connections at once: the
    slice of the settings (`EVENTLOG_MAX_HEADER_BYTES`, …) the protocol reads."""

    max_header_bytes: int
    max_headers: int
    header_timeout: float = Field(alias="header_timeout_seconds")
    max_connections: int


class SharedConnectionLimits:
    """An ASGI middleware: at the lifespan's startup, puts the connection limits into the
    state the server shares with the protocol of every connection (ASGI's lifespan state)."""

    def __init__(self, app: ASGIApp, *, limits: ConnectionLimits) -> None:
        self.app = app
        self._limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and "state" in scope:
            scope["state"][LIMITS_KEY] = self._limits
        await self.app(scope, receive, send)


class HeadRefused(NotAdmitted):
    """A request head (or a connection) refused before the app saw it: one leaf per code."""


class HeadersTooLarge(HeadRefused):
    code = "headers_too_large"  # over its bytes or its header lines


class HeaderTimeout(HeadRefused):
    code = "header_timeout"  # part of a head came, not all of it within the timeout


class TooManyConnections(HeadRefused):
    code = "too_many_connections"  # the process holds its connections already


# The codes only this protocol answers with (the app never sees these requests).
CONNECTION_CODES = frozenset(
    refusal.code for refusal in (HeadersTooLarge, HeaderTimeout, TooManyConnections)
)


def refusal_bytes(refused: HeadRefused, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """The whole HTTP/1.1 problem response to `refused`, which closes the connection."""
    response = problem(refused.code, refused.detail)
    status = response.status_code
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}".encode(), *_joined(default_headers)]
    lines += _joined([(n, v) for n, v in response.raw_headers if n != b"connection"])
    lines.append(b"connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + response.body


def _joined(headers: list[tuple[bytes, bytes]]) -> list[bytes]:
    return [name + b": " + value for name, value in headers]


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with bounded request heads, a head timeout and a cap."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        limits = app_state.get(LIMITS_KEY)
        if not isinstance(limits, ConnectionLimits):
            raise TypeError(
                f"the app's lifespan state has no {LIMITS_KEY} (SharedConnectionLimits)"
            )
        self.limits = limits
        # Between the end of one request (or the connection's start) and the end of the
        # next one's head: bytes of it seen so far, its deadline.
        self._in_head = True
        self._head_bytes = 0
        self._head_deadline: float | None = None  # None: no head is being read
        # One timer per connection, not per request: it is re-armed for the deadline of
        # the head being read when it fires early (a kept-alive connection's later heads).
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(
                TooManyConnections(
                    f"the process holds {self.limits.max_connections} connections "
                    "(EVENTLOG_MAX_CONNECTIONS)",
                )
            )
            return
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # (A closed transport reads nothing more: no check for a refusal already sent.)
        if not self._in_head:
            self._feed(data)
            return
        if self._head_deadline is None:
            self._start_head()
        room = self.limits.max_header_bytes - self._head_bytes
        if len(data) <= room:
            self._head_bytes += len(data)
            self._feed(data)
            return
        # Feed what fits: if the head ends in it, the rest is the request's body (or the
        # next request); if not, the head is too large and nothing more is read.
        self._head_bytes += room
        self._feed(data[:room])
        if self._in_head and not self.transport.is_closing():
            self._refuse(
                HeadersTooLarge(
                    f"the request's head is over {self.limits.max_header_bytes} bytes "
                    "(EVENTLOG_MAX_HEADER_BYTES)",
                )
            )
        elif not self.transport.is_closing():
            self._feed(data[room:])

    def _feed(self, data: bytes) -> None:
        """uvicorn's `data_received`, with the refusals of the callbacks answered."""
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError as error:
            # A callback's exception is the parser error's context (httptools).
            if isinstance(error.__context__, HeadRefused):
                self._refuse(error.__context__)
                return
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_deadline = None
        # Counted once the head is whole (the byte limit already bounds what it holds):
        # no cost per header line.
        if len(self.headers) > self.limits.max_headers:
            raise HeadersTooLarge(
                f"the request has more than {self.limits.max_headers} headers "
                "(EVENTLOG_MAX_HEADERS)",
            )
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0

    def _start_head(self) -> None:
        """A head begins (the connection opened, or a next request's first bytes came)."""
        self._head_deadline = self.loop.time() + self.limits.header_timeout
        if self._head_timer is None:
            self._head_timer = self.loop.call_at(self._head_deadline, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        deadline = self._head_deadline
        if self.transport.is_closing() or deadline is None:
            return  # closed, or between requests (the next head arms the timer again)
        if self.loop.time() < deadline:  # set since: a later request's head
            self._head_timer = self.loop.call_at(deadline, self._head_timed_out)
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined head that dawdles behind a response still being sent: the
            # response ends, then the connection closes (the half head is never answered).
            self.cycle.keep_alive = False
            self.flow.pause_reading()
            return
        if self._head_bytes == 0:
            self.transport.close()
            return
        self._refuse(
            HeaderTimeout(
                f"the request's head did not arrive within {self.limits.header_timeout:g} s "
                "(EVENTLOG_HEADER_TIMEOUT_SECONDS)",
            )
        )

    def _refuse(self, refused: HeadRefused) -> None:
        """Answer `refused` on the transport and close the connection; read nothing more."""
        self._cancel_head_timer()
        self.logger.warning("connection refused: %s: %s", refused.code, refused.detail)
        self.transport.write(refusal_bytes(refused, self.server_state.default_headers))
        self.transport.close()

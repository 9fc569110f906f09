"""What a connection may take before it is a request at all (issue 21, item 2).

uvicorn's httptools protocol reads a request's head with no bound: a header that never
ends grows the process by as much as the caller sends, and a connection that sends half a
head, or nothing, stays open for good — all before any key is checked. This protocol is
uvicorn's own (`HttpToolsProtocol`), with four checks in front of its parser:

- the head (request line and headers) is at most `EVENTLOG_MAX_HEADER_BYTES`: past it the
  parser is fed no more, the answer is 431 `headers_too_large` and the connection closes;
- at most `EVENTLOG_MAX_HEADERS` header lines: past it, 431 `headers_too_large` too;
- a head must be complete within `EVENTLOG_HEADER_TIMEOUT_SECONDS` of the connection's
  opening (or of its first byte, after a kept-alive request): past it, 408
  `header_timeout` when part of a head came, a plain close when nothing did (idle
  kept-alive connections are closed by uvicorn's keep-alive timeout, as before);
- at most `EVENTLOG_MAX_CONNECTIONS` connections per process: one more is answered 503
  `too_many_connections` and closed at once.

The answers are problem+json rows of `PROBLEM_CODES`, written straight on the transport
(the app never sees these requests: no route, no key, no access line). uvicorn is given
this class by name (`app/cli.py`), and the class reads its limits from the environment's
settings once per process, as `create_app` reads its own.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from functools import cache
from http import HTTPStatus
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.api.problems import PROBLEM_CODES, PROBLEM_MEDIA_TYPE
from app.settings import Settings


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The bounds of one connection's request heads, and of the connections at once."""

    max_header_bytes: int
    max_headers: int
    header_timeout: float
    max_connections: int

    @classmethod
    def of(cls, settings: Settings) -> ConnectionLimits:
        """The limits `settings` configure."""
        return cls(
            max_header_bytes=settings.max_header_bytes,
            max_headers=settings.max_headers,
            header_timeout=settings.header_timeout_seconds,
            max_connections=settings.max_connections,
        )


@cache
def process_limits() -> ConnectionLimits:
    """This process's limits, from its `EVENTLOG_*` environment (read on first use)."""
    return ConnectionLimits.of(Settings())


def raw_problem(code: str, detail: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A whole HTTP/1.1 problem+json response for `code` that closes the connection."""
    row = PROBLEM_CODES[code]
    body = json.dumps(
        {
            "type": f"urn:mcp-eventlog:problem:{code}",
            "title": HTTPStatus(row.status).phrase,
            "status": row.status,
            "detail": detail,
            "code": code,
        }
    ).encode()
    lines = [f"HTTP/1.1 {row.status} {HTTPStatus(row.status).phrase}".encode()]
    lines += [name + b": " + value for name, value in default_headers]
    lines += [
        f"{name}: {value}".encode()
        for name, value in row.headers.items()
        if name.lower() != "connection"
    ]
    lines += [
        b"content-type: " + PROBLEM_MEDIA_TYPE.encode(),
        b"content-length: " + str(len(body)).encode(),
        b"connection: close",
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


# The codes only this protocol answers with (the app never sees these requests).
CONNECTION_CODES = frozenset({"header_timeout", "headers_too_large", "too_many_connections"})


class _Refused(Exception):
    """Raised in a parser callback to stop the parser; the refusal is on the protocol."""


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
        self.limits = process_limits()
        # Between the end of one request (or the connection's start) and the end of the
        # next one's head: bytes of it seen so far, its deadline.
        self._in_head = True
        self._head_bytes = 0
        self._head_deadline: float | None = None  # None: no head is being read
        # One timer per connection, not per request: it is re-armed for the deadline of
        # the head being read when it fires early (a kept-alive connection's later heads).
        self._head_timer: asyncio.TimerHandle | None = None
        self._refusal: tuple[str, str] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(
                "too_many_connections",
                f"the process holds {self.limits.max_connections} connections "
                "(EVENTLOG_MAX_CONNECTIONS)",
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
                "headers_too_large",
                f"the request's head is over {self.limits.max_header_bytes} bytes "
                "(EVENTLOG_MAX_HEADER_BYTES)",
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
        except httptools.HttpParserError:
            if self._refusal is not None:
                self._refuse(*self._refusal)
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
            self._refusal = (
                "headers_too_large",
                f"the request has more than {self.limits.max_headers} headers "
                "(EVENTLOG_MAX_HEADERS)",
            )
            raise _Refused
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
            "header_timeout",
            f"the request's head did not arrive within {self.limits.header_timeout:g} s "
            "(EVENTLOG_HEADER_TIMEOUT_SECONDS)",
        )

    def _refuse(self, code: str, detail: str) -> None:
        """Answer `code` on the transport and close the connection; read nothing more."""
        self._cancel_head_timer()
        self.logger.warning("connection refused: %s: %s", code, detail)
        self.transport.write(raw_problem(code, detail, self.server_state.default_headers))
        self.transport.close()

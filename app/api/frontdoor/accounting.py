"""One access line and one count per HTTP request, whatever happened to it.

As each request ends: its access log line and its metrics, with one request id
(`X-Request-ID`, kept if sane, else made up; returned on the response and stamped on every
log line of the request), and the status the client got — 499 when the client went away
before an answer was started, so that 5xx means a fault of the service. An error nobody
answered is answered here (500 `internal_error`, one traceback in the log). Responses pass
through as they are sent, never buffered: a `text/event-stream` answer streams for
minutes, and a reader that leaves it ends it normally (its status stays the 200 it got).
"""

from __future__ import annotations

import logging
import time
import uuid

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.metrics import Metrics, observe_request, route_template
from app.api.problems import answer, internal_error
from app.errors import EventLogError
from app.logs import incoming_request_id, log_request, request_id_set

log = logging.getLogger(__name__)

CLIENT_CLOSED = 499  # nginx's "client closed request": logged and counted, never sent


class RequestAccounting:
    """An ASGI middleware, the outermost: logs, counts and answers for every HTTP request."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        exchange = Exchange(receive, send, incoming_request_id(scope) or uuid.uuid4().hex)
        with request_id_set(exchange.request_id):
            try:
                await self.app(scope, exchange.receive, exchange.send)
            except Exception as error:
                await exchange.failed(scope, error)
            finally:
                status = exchange.final_status()
                route = route_template(scope)
                seconds = time.perf_counter() - started
                observe_request(self._metrics, scope["method"], route, status, seconds)
                log_request(
                    exchange.request_id, scope["method"], route, scope["path"], status, seconds
                )


class Exchange:
    """One request's side of the conversation: its id, the status sent, a client gone."""

    __slots__ = ("_id_header", "_receive", "_send", "left_early", "request_id", "status")

    def __init__(self, receive: Receive, send: Send, request_id: str) -> None:
        self._receive = receive
        self._send = send
        self.request_id = request_id
        self._id_header = (b"x-request-id", request_id.encode())
        self.status: int | None = None
        # The client went away before an answer was started: whatever the app sends after
        # that reaches nobody, so the request is logged as 499, not as that status.
        self.left_early = False

    async def receive(self) -> Message:
        """The request's next message, noting a client that left before an answer."""
        message = await self._receive()
        if message["type"] == "http.disconnect" and self.status is None:
            self.left_early = True
        return message

    async def send(self, message: Message) -> None:
        """Send on, with the request id on the answer (nothing once the client left)."""
        if self.left_early:
            return  # an answer to nobody (FastAPI's 400 for a body cut short)
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            message["headers"] = [*message.get("headers", ()), self._id_header]
        await self._send(message)

    async def failed(self, scope: Scope, error: Exception) -> None:
        """Answer an error that reached the front door, if an answer can still be sent."""
        if isinstance(error, ClientDisconnect) or (isinstance(error, OSError) and self.left_early):
            # A reader that leaves a streamed answer ends it: a normal end, not an error.
            self.left_early = self.left_early or self.status is None
            return
        if self.status is not None:
            # Part of the answer is out: nothing to do but say why it stops short.
            log.exception("the response failed after it started", exc_info=error)
            return
        if isinstance(error, EventLogError):
            response = answer(error)
        else:
            log.exception("unhandled error", exc_info=error)
            response = internal_error()
        await response(scope, self.receive, self.send)

    def final_status(self) -> int:
        """What the client got: 499 if it left before an answer, else the status (500: none)."""
        if self.left_early:
            return CLIENT_CLOSED
        return 500 if self.status is None else self.status

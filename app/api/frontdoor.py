"""The front door: the one ASGI middleware every HTTP request passes (docs/front-door.md).

Before the route runs:
1. Who may knock (DNS rebinding, cross-site pages): the `Host` must be one this service
   answers as (`EVENTLOG_ALLOWED_HOSTS`; loopback only while the service runs open), and a
   browser's `Origin` the service's own or listed (`EVENTLOG_ALLOWED_ORIGINS`): 421
   `host_not_allowed`, 403 `origin_not_allowed`.
2. What a request that may carry a body declares: JSON or nothing, never a form, never an
   encoding (415); a declared length within the limit (413).
3. The router matches the route (404, 405 without a body read).
4. When the route's handler first asks for its body: the caller's key for the route's own
   scope (401/403) — before a byte of the body is read — then the process's budget of
   bodies held at once (503), the body whole within its size and time (413, 408), strict
   JSON (422).

And as each request ends, whatever happened: its access log line and its metrics, with
one request id, and the status the client got — 499 when the client went away before an
answer was started, so that 5xx means a fault of the service. Responses pass through as
they are sent, never buffered: a `text/event-stream` answer streams for minutes, and a
reader that leaves it ends it normally (its status stays the 200 it got).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.auth import Keyring
from app.api.auth import Scope as KeyScope
from app.api.deps import get_admin, get_principal
from app.api.limits import BodyBudget, BodyReader, ClientGone, HeldBody, has_body
from app.api.media import check_declared, check_strict_json
from app.api.metrics import Metrics, observe_request, route_template
from app.api.problems import (
    BodyTimeout,
    BodyTooLarge,
    Forbidden,
    HostNotAllowed,
    InvalidJson,
    InvalidText,
    OriginNotAllowed,
    Overloaded,
    Refused,
    Unauthenticated,
    internal_error,
    refusal,
)
from app.logs import incoming_request_id, log_request, request_id_set
from app.settings import Settings
from app.text import printable

log = logging.getLogger(__name__)

CLIENT_CLOSED = 499  # nginx's "client closed request": logged and counted, never sent
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})
_SCOPE_OF_DEPENDENCY: dict[object, KeyScope] = {
    get_admin: KeyScope.ADMIN,
    get_principal: KeyScope.WRITER,
}
_SCOPE_ORDER = (KeyScope.ADMIN, KeyScope.WRITER)
_BODY_REFUSALS = (
    Unauthenticated,
    Forbidden,
    BodyTooLarge,
    BodyTimeout,
    Overloaded,
    InvalidJson,
    InvalidText,
)

Headers = Mapping[bytes, bytes]


class FrontDoor:
    """Admits, reads and accounts for every HTTP request (see the module's docstring)."""

    def __init__(
        self, app: ASGIApp, *, keyring: Keyring, settings: Settings, metrics: Metrics
    ) -> None:
        self.app = app
        self._keyring = keyring
        self._metrics = metrics
        self._hosts = settings.served_hosts()
        self._origins = frozenset(o.lower().rstrip("/") for o in settings.allowed_origins)
        self._check_origin = self._hosts is not None or bool(self._origins)
        self._budget = BodyBudget(settings.max_body_bytes_in_flight)
        self._reader = BodyReader(settings.max_body_bytes, settings.body_timeout_seconds)
        self._scopes: dict[int, KeyScope | None] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = dict(scope["headers"])
        exchange = _Exchange(receive, send, incoming_request_id(scope) or uuid.uuid4().hex)
        held = HeldBody(self._budget)
        with request_id_set(exchange.request_id):
            try:
                await self.app(scope, self._admit(scope, headers, exchange, held), exchange.send)
            except Exception as error:
                await exchange.failed(scope, error)
            finally:
                held.release()
                status = exchange.final_status()
                route = route_template(scope)
                seconds = time.perf_counter() - started
                observe_request(self._metrics, scope["method"], route, status, seconds)
                log_request(
                    exchange.request_id, scope["method"], route, scope["path"], status, seconds
                )

    def _admit(
        self, scope: Scope, headers: Headers, exchange: _Exchange, held: HeldBody
    ) -> Receive:
        """Check what needs no body; the `receive` the app gets (its body read on demand)."""
        self._check_host_and_origin(headers)
        if scope["method"] in _BODILESS:
            return exchange.receive
        with_body = has_body(headers)
        check_declared(headers, with_body=with_body)
        if not with_body:
            return exchange.receive
        self._reader.check_declared_size(headers)
        return self._body_on_demand(scope, headers, exchange, held)

    def _body_on_demand(
        self, scope: Scope, headers: Headers, exchange: _Exchange, held: HeldBody
    ) -> Receive:
        """A `receive` whose first call admits the caller, then reads the body whole.

        The first call comes from the route's handler, once the router has matched it (an
        unknown path never asks for its body), so the key is checked against the route's
        own scope before a byte of the body is read.
        """
        asked = False

        async def receive() -> Message:
            nonlocal asked
            if asked:
                return await exchange.receive()
            asked = True
            try:
                self._authenticate(headers, scope.get("route"))
                body = await self._reader.read(headers, exchange.receive, held)
                if body:
                    check_strict_json(body)
            except ClientGone:
                return {"type": "http.disconnect"}
            except _BODY_REFUSALS as error:
                raise Refused(error) from None
            return {"type": "http.request", "body": body, "more_body": False}

        return receive

    def _check_host_and_origin(self, headers: Headers) -> None:
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if self._hosts is not None and _host_name(host) not in self._hosts:
            raise HostNotAllowed(
                f"this service does not answer as {printable(host)!r}: see EVENTLOG_ALLOWED_HOSTS"
            )
        origin = headers.get(b"origin")
        if origin is None or not self._check_origin:
            return
        claimed = origin.decode("latin-1").lower().rstrip("/")
        if claimed in self._origins or claimed.partition("://")[2] == host:
            return
        raise OriginNotAllowed(
            f"requests from pages of {printable(claimed)!r} are not accepted: "
            "see EVENTLOG_ALLOWED_ORIGINS"
        )

    def _authenticate(self, headers: Headers, route: object) -> None:
        needed = self._scope_needed(route)
        if needed is None:
            return
        authorization = headers.get(b"authorization")
        principal = self._keyring.authenticate(
            None if authorization is None else authorization.decode("latin-1")
        )
        Keyring.require(principal, needed)

    def _scope_needed(self, route: object) -> KeyScope | None:
        """The key scope the route asks for through its dependencies (None: no key)."""
        key = id(route)
        if key not in self._scopes:
            needed: set[KeyScope] = set()
            if isinstance(route, APIRoute):
                needed = {
                    _SCOPE_OF_DEPENDENCY[call]
                    for call in _calls(route.dependant)
                    if call in _SCOPE_OF_DEPENDENCY
                }
            self._scopes[key] = next((s for s in _SCOPE_ORDER if s in needed), None)
        return self._scopes[key]


class _Exchange:
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
        message = await self._receive()
        if message["type"] == "http.disconnect" and self.status is None:
            self.left_early = True
        return message

    async def send(self, message: Message) -> None:
        if self.left_early:
            return  # an answer to nobody (FastAPI's 400 for a body cut short)
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            message["headers"] = [*message.get("headers", ()), self._id_header]
        await self._send(message)

    async def failed(self, scope: Scope, error: Exception) -> None:
        """Answer an error that reached the front door, if an answer can still be sent."""
        if isinstance(error, ClientDisconnect | ClientGone) or (
            isinstance(error, OSError) and self.left_early
        ):
            # A reader that leaves a streamed answer ends it: a normal end, not an error.
            self.left_early = self.left_early or self.status is None
            return
        if self.status is not None:
            # Part of the answer is out: nothing to do but say why it stops short.
            log.exception("the response failed after it started", exc_info=error)
            return
        try:
            response = refusal(error)
        except KeyError:
            log.exception("unhandled error", exc_info=error)
            response = internal_error()
        await response(scope, self.receive, self.send)

    def final_status(self) -> int:
        """What the client got: 499 if it left before an answer, else the status (500: none)."""
        if self.left_early:
            return CLIENT_CLOSED
        return 500 if self.status is None else self.status


def _host_name(host: str) -> str:
    """`Host` without its port: `127.0.0.1:8080` → `127.0.0.1`, `[::1]:80` → `::1`."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _calls(dependant: Dependant) -> list[object]:
    calls: list[object] = []
    for sub in dependant.dependencies:
        calls.append(sub.call)
        calls.extend(_calls(sub))
    return calls

"""A request's body: declared as JSON, read only for a known caller, whole and bounded.

Before the route runs, a request that may carry a body must declare JSON or nothing, and
no encoding (415), with a declared length within the limit (413). The body itself is read
when the route's handler first asks for it — so after the router matched the route (an
unknown path never has its body read) — and then in this order: the caller's key for the
route's own scope (401/403) before a byte is read, the process's budget of bodies held at
once (503), the whole body within its size and time (413, 408), strict JSON (422).
`GET`, `HEAD` and `OPTIONS` never have a body read.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.frontdoor.keys import RouteKeys
from app.api.frontdoor.limits import BodyBudget, BodyReader, HeldBody, has_body
from app.api.frontdoor.media import check_declared, check_strict_json
from app.api.problems import ErrorCarrier, send_problem
from app.errors import EventLogError, NotAdmitted

_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})

Headers = Mapping[bytes, bytes]


class BodyAdmission:
    """An ASGI middleware: admits a request's body (see the module's docstring)."""

    def __init__(
        self, app: ASGIApp, *, keys: RouteKeys, reader: BodyReader, budget: BodyBudget
    ) -> None:
        self.app = app
        self._keys = keys
        self._reader = reader
        self._budget = budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _BODILESS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        with_body = has_body(headers)
        try:
            check_declared(headers, with_body=with_body)
            if with_body:
                self._reader.check_declared_size(headers)
        except NotAdmitted as refused:
            await send_problem(refused, scope, receive, send)
            return
        if not with_body:
            await self.app(scope, receive, send)
            return
        held = HeldBody(self._budget)
        try:
            await self.app(scope, self._on_demand(scope, headers, receive, held), send)
        finally:
            held.release()

    def _on_demand(
        self, scope: Scope, headers: Headers, receive: Receive, held: HeldBody
    ) -> Receive:
        """A `receive` whose first call admits the caller, then reads the body whole.

        The first call comes from the route's handler, once the router has matched it, so
        the key is checked against the route's own scope before a byte of the body is read.
        A refusal leaves inside an `ErrorCarrier`: FastAPI lets nothing else out of its read.
        """
        asked = False

        async def admitted() -> Message:
            nonlocal asked
            if asked:
                return await receive()
            asked = True
            try:
                self._keys.check(headers, scope.get("route"))
                body = await self._reader.read(headers, receive, held)
                if body:
                    check_strict_json(body)
            except ClientDisconnect:
                return {"type": "http.disconnect"}
            except EventLogError as refused:
                raise ErrorCarrier(refused) from None
            return {"type": "http.request", "body": body, "more_body": False}

        return admitted

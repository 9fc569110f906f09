"""Who may knock: the `Host` a request names and the `Origin` a browser sends.

An open service (no keys) answers only as loopback names, so that a page whose DNS name
was rebound to 127.0.0.1 cannot read it (421 `host_not_allowed`); a browser page of
another origin is refused (403 `origin_not_allowed`): a cross-site form post could
otherwise open or finish generations. Settings: `EVENTLOG_ALLOWED_HOSTS`,
`EVENTLOG_ALLOWED_ORIGINS` (docs/front-door.md). HTTP requests and WebSocket upgrades
alike pass it, before anything else is looked at.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.problems import send_problem
from app.errors import HostNotAllowed, NotAdmitted, OriginNotAllowed
from app.text import printable

Headers = Mapping[bytes, bytes]


class HostAndOrigin:
    """An ASGI middleware: refuses a `Host` or an `Origin` the service does not answer for."""

    def __init__(
        self, app: ASGIApp, *, hosts: Collection[str] | None, origins: Collection[str]
    ) -> None:
        """`hosts` None: any host; `origins`: those accepted besides the service's own."""
        self.app = app
        self._hosts = hosts
        self._origins = frozenset(o.lower().rstrip("/") for o in origins)
        self._check_origin = hosts is not None or bool(self._origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            try:
                self.check(dict(scope["headers"]))
            except NotAdmitted as refused:
                await send_problem(refused, scope, receive, send)
                return
        await self.app(scope, receive, send)

    def check(self, headers: Headers) -> None:
        """`HostNotAllowed` or `OriginNotAllowed`, or nothing when both may knock."""
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if self._hosts is not None and host_name(host) not in self._hosts:
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


def host_name(host: str) -> str:
    """`Host` without its port: `127.0.0.1:8080` → `127.0.0.1`, `[::1]:80` → `::1`."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rpartition(":")[0] if host.count(":") == 1 else host

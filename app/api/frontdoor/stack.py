"""The front door: the pieces every request passes, in order (docs/front-door.md).

Each piece is a small ASGI middleware that does one job (starlette's `TrustedHostMiddleware`
is the model), outermost first:

1. `RequestAccounting` (`accounting.py`): the request id, one access line and one count
   per request, 499 for a client that left, the last answer for an error nobody answered.
2. `HostAndOrigin` (`hosts.py`): who may knock — 421 `host_not_allowed`, 403
   `origin_not_allowed`; HTTP requests and WebSocket upgrades alike.
3. `BodyAdmission` (`bodies.py`): what a body declares (415, 413), then, when the route's
   handler asks for it, the route's key (401/403, by `RouteKeys` of `keys.py`), the budget
   of bodies held at once (503), the body whole (413, 408) and strict JSON (422).

Then the router (404, 405 without a body read) and the route. Before all of these, what a
connection may take before it is a request at all (the bytes, lines and time of its head,
the connections at once) is checked by the server's protocol (`connections.py`), which
`SharedConnectionLimits` hands this app's limits at startup; a connection's other timeouts
are uvicorn's settings (`app/cli.py`).
"""

from __future__ import annotations

from fastapi import FastAPI

from app.api.auth import Keyring
from app.api.frontdoor.accounting import RequestAccounting
from app.api.frontdoor.bodies import BodyAdmission
from app.api.frontdoor.connections import ConnectionLimits, SharedConnectionLimits
from app.api.frontdoor.hosts import HostAndOrigin
from app.api.frontdoor.keys import RouteKeys
from app.api.frontdoor.limits import BodyBudget, BodyReader
from app.api.metrics import Metrics
from app.settings import Settings


def install_front_door(
    app: FastAPI, *, keyring: Keyring, settings: Settings, metrics: Metrics
) -> None:
    """Put the pieces in front of `app`'s routes."""
    # Starlette puts the middleware added last outermost: innermost first, then outwards.
    app.add_middleware(
        BodyAdmission,
        keys=RouteKeys(keyring),
        reader=BodyReader(settings.max_body_bytes, settings.body_timeout_seconds),
        budget=BodyBudget(settings.max_body_bytes_in_flight),
    )
    app.add_middleware(
        HostAndOrigin, hosts=settings.served_hosts(), origins=settings.allowed_origins
    )
    app.add_middleware(RequestAccounting, metrics=metrics)
    app.add_middleware(SharedConnectionLimits, limits=ConnectionLimits.of(settings))

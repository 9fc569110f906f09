"""The gateway's application: everything `serve` serves, plus the MCP endpoint.

`create_gateway_app(settings)` builds the service's app (`app.api.app.create_app`) and
adds, at `EVENTLOG_GATEWAY_PATH`, the MCP endpoint forwarded to
`EVENTLOG_GATEWAY_UPSTREAM`. It passes the same front door (Host/Origin validation, body
limits) as every route. Its `/readyz` says, besides the service's checks, whether the
upstream answers. On the stop signal the standalone streams end at once and the calls in
flight have `EVENTLOG_GATEWAY_SHUTDOWN_GRACE_SECONDS` to finish (then they are marked
`upstream_lost`, their clients told), all before the database closes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.api.app import create_app
from app.api.deps import ApiState
from app.api.frontdoor.draining import drained_on_signal
from app.api.problems import problem
from app.api.routes.health import readyz
from app.errors import UpstreamUnreachable
from app.gateway.endpoint import Gateway
from app.gateway.metrics import GatewayMetrics
from app.gateway.upstream import Upstream
from app.settings import Settings


def create_gateway_app(settings: Settings | None = None) -> FastAPI:
    """The service with the MCP endpoint in front of `settings.gateway_upstream`."""
    settings = settings or Settings()
    if not settings.gateway_upstream:
        raise ValueError("EVENTLOG_GATEWAY_UPSTREAM (--upstream) is not set")
    app = create_app(settings)
    state: ApiState = app.state.api
    gateway = Gateway(
        state.container,
        Upstream(settings.gateway_upstream, settings.gateway),
        GatewayMetrics(state.metrics.registry),
    )
    app.state.gateway = gateway

    async def ready(request: Request) -> Response:
        answer = await readyz(request)
        if isinstance(answer, Response):
            return answer
        if not await gateway.upstream.reachable():
            return problem(
                UpstreamUnreachable.code,
                "the upstream MCP server does not answer",
                headers={"Retry-After": "5"},
            )
        return Response(answer.model_dump_json(), media_type="application/json")

    # In front of the API's own `/readyz` (the first route that matches answers).
    app.router.routes.insert(0, Route("/readyz", ready, methods=["GET", "HEAD"]))

    async def mcp(request: Request) -> Response:
        request.scope["route"] = endpoint  # the access log's and metrics' route label
        return await gateway.handle(request)

    endpoint = Route(settings.gateway_path, mcp, methods=["GET", "POST", "DELETE"])
    app.router.routes.insert(0, endpoint)
    served = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(running: FastAPI) -> AsyncIterator[None]:
        async with served(running):
            try:
                with drained_on_signal(gateway.stopping):
                    yield
            finally:
                await gateway.close()  # before the database closes: recordings finish

    app.router.lifespan_context = lifespan
    return app

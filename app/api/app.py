"""The application factory: `create_app(settings)`; no import-time globals."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from sqlalchemy.engine import make_url

from app import __version__, bootstrap, telemetry
from app.api.auth import Keyring
from app.api.deps import ApiState, ChannelSlots
from app.api.frontdoor.draining import drained_on_signal
from app.api.frontdoor.stack import install_front_door
from app.api.metrics import Metrics
from app.api.problems import install_problem_handlers
from app.api.routes import admin, admin_tasks, channel, health, live, tasks, writer
from app.console.router import router as console_router
from app.settings import Settings

if TYPE_CHECKING:
    from app.telemetry.tracing import Tracing

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, tracing: Tracing | None = None) -> FastAPI:
    """Build the service: its parts come from `bootstrap.build`; the lifespan runs them.

    `settings` and `tracing` default to what the environment says (`EVENTLOG_*`, `OTEL_*`).
    """
    settings = settings or Settings()
    tracing = tracing or telemetry.from_environment()
    metrics = Metrics()
    state = ApiState(
        bootstrap.build(settings, [metrics], tracing),
        Keyring(settings.keys),
        metrics,
        ChannelSlots(settings.channel_max_per_key),
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        log.info("mcp-eventlog %s on %s", __version__, _redacted(settings.database_url))
        if state.keyring.open:
            log.warning(
                "no keys configured (EVENTLOG_KEYS): the service is open, every caller is "
                "tenant 'default' with writer and admin scopes; serve binds to loopback only"
            )
        async with state.container.running():
            with drained_on_signal(state.container.hub.drain):
                yield

    # FastAPI whose /docs and /redoc pages load their scripts from this service, not a CDN.
    app = FastAPIOffline(
        title="mcp-eventlog",
        version=__version__,
        summary="Durable stream generations and a safe Last-Event-ID resume verdict.",
        lifespan=lifespan,
        # A redirect would echo the request's Host into Location; a path is exact or 404.
        redirect_slashes=False,
    )
    app.state.api = state
    install_front_door(app, keyring=state.keyring, settings=settings, metrics=metrics)
    install_problem_handlers(app)
    app.include_router(health.router)
    app.include_router(writer.router)
    app.include_router(channel.router)
    app.include_router(live.router)
    app.include_router(tasks.router)
    app.include_router(admin.router)
    app.include_router(admin_tasks.router)
    app.include_router(console_router)
    if tracing is not None:
        tracing.instrument_app(app)
    return app


def _redacted(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)

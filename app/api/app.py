"""The application factory: `create_app(settings)`; no import-time globals."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from sqlalchemy.engine import make_url

from app import __version__
from app.api import health, writer
from app.api.limits import BodyLimitMiddleware
from app.api.media import require_json_body
from app.api.problems import install_problem_handlers
from app.service.eventlog import EventLogService
from app.settings import Settings
from app.storage.engine import create_engines
from app.storage.store import Store

log = logging.getLogger(__name__)

BODY_TIMEOUT_SECONDS = 30.0


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the service; the lifespan opens the database pool and closes it."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engines = create_engines(settings)
        store = Store(engines)
        app.state.settings = settings
        app.state.store = store
        app.state.service = EventLogService(store, settings)
        log.info("mcp-eventlog %s on %s", __version__, _redacted(settings.database_url))
        try:
            yield
        finally:
            await engines.dispose()

    app = FastAPI(
        title="mcp-eventlog",
        version=__version__,
        summary="Durable stream generations and a safe Last-Event-ID resume verdict.",
        lifespan=lifespan,
    )
    app.add_middleware(
        BodyLimitMiddleware, max_bytes=settings.max_body_bytes, timeout=BODY_TIMEOUT_SECONDS
    )
    install_problem_handlers(app)
    app.include_router(health.router)
    app.include_router(writer.router, dependencies=[Depends(require_json_body)])
    return app


def _redacted(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)

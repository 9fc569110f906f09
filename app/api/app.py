"""The application factory: `create_app(settings)`; no import-time globals."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from sqlalchemy.engine import make_url

from app import __version__
from app.api import admin, health, metrics, writer
from app.api.auth import Keyring, install_auth_handlers
from app.api.limits import BodyLimitMiddleware
from app.api.logs import RequestLogMiddleware
from app.api.media import require_json_body
from app.api.metrics import Metrics, RequestMetricsMiddleware
from app.api.problems import install_problem_handlers
from app.console.router import router as console_router
from app.service.admin import AdminService
from app.service.audit import DecisionAudit
from app.service.eventlog import EventLogService
from app.service.observer import Observers
from app.service.retention import RetentionWorker
from app.settings import Settings
from app.storage.decisions import DecisionStore
from app.storage.engine import create_engines
from app.storage.inspect import Inspector
from app.storage.retention import RetentionStore
from app.storage.store import Store

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the service; the lifespan opens the database pool and closes it."""
    settings = settings or Settings()
    keyring = Keyring(settings.keys)
    counters = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engines = create_engines(settings)
        store = Store(engines)
        # Every write of the process shares the store's writer (SQLite: one group committer).
        decisions = DecisionStore(engines, store.writer)
        audit = DecisionAudit(decisions, enabled=settings.decision_log, on_dropped=counters.dropped)
        retention = RetentionWorker(
            RetentionStore(engines, store.writer),
            decisions,
            settings,
            on_pass=counters.retention_pass,
        )
        app.state.settings = settings
        app.state.store = store
        app.state.engines = engines
        app.state.retention = retention
        app.state.service = EventLogService(store, settings, observer=Observers((counters, audit)))
        app.state.admin = AdminService(
            store, Inspector(engines, store.writer), decisions, audit, settings
        )
        log.info("mcp-eventlog %s on %s", __version__, _redacted(settings.database_url))
        if keyring.open:
            log.warning(
                "no keys configured (EVENTLOG_KEYS): the service is open, every caller is "
                "tenant 'default' with writer and admin scopes; serve binds to loopback only"
            )
        audit.start()
        retention.start()
        try:
            yield
        finally:
            await retention.stop()
            await audit.stop()
            await store.close()
            await engines.dispose()

    app = FastAPI(
        title="mcp-eventlog",
        version=__version__,
        summary="Durable stream generations and a safe Last-Event-ID resume verdict.",
        lifespan=lifespan,
    )
    app.state.keyring = keyring
    app.state.metrics = counters
    app.state.head_revision = None  # read by /readyz on first use
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        timeout=settings.body_timeout_seconds,
    )
    # Added last, so outermost: they see every request, refused bodies included.
    app.add_middleware(RequestMetricsMiddleware, metrics=counters)
    app.add_middleware(RequestLogMiddleware)
    install_problem_handlers(app)
    install_auth_handlers(app)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(writer.router, dependencies=[Depends(require_json_body)])
    app.include_router(admin.router, dependencies=[Depends(require_json_body)])
    app.include_router(console_router)
    return app


def _redacted(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)

"""The app in-process, lifespan included, behind an `httpx.AsyncClient`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI

from app.api.app import create_app
from app.api.deps import ApiState
from app.settings import LOOPBACK_HOSTS, Settings

BASE_URL = "http://eventlog.test"
TEST_HOSTS = ("eventlog.test", *LOOPBACK_HOSTS)


def make_settings(database_url: str, **overrides: Any) -> Settings:
    """Settings for a test: the given database, small limits where a test wants them.

    The in-process clients call the app as `eventlog.test`, so that name is served too
    (an open service serves loopback names only; `tests/api/frontdoor/test_hosts.py` checks
    that).
    """
    overrides.setdefault("allowed_hosts", TEST_HOSTS)
    return Settings(database_url=database_url, **overrides)


@asynccontextmanager
async def started_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """Start the app's lifespan; yield the app and a client bound to it; stop it at the end."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            yield app, client


@asynccontextmanager
async def app_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """As `started_app`, the client only."""
    async with started_app(settings) as (_app, client):
        yield client


def state_of(app: FastAPI) -> ApiState:
    """The app's typed state: its container (database, services), keys and metrics."""
    state: ApiState = app.state.api
    return state

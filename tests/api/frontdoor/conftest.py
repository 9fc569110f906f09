"""Fixtures of the front door's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tests.support.app import started_app
from tests.support.front_door import open_settings


@pytest.fixture
async def open_app(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async with started_app(open_settings(database_url)) as (app, _client):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as http:
            yield app, http

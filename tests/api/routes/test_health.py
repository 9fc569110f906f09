"""Liveness and readiness (`app/api/routes/health.py`), on both databases."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import httpx
from alembic import command

from app.storage.migrate import alembic_config
from tests.support.app import app_client, make_settings


async def test_head_on_health_and_readiness(client: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz"):
        answer = await client.head(path)
        assert answer.status_code == 200
        assert answer.content == b""


async def test_ready_when_the_schema_is_at_head(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


async def test_not_ready_when_the_schema_is_behind(tmp_path: Path, sqlite_template: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(sqlite_template, path)
    url = f"sqlite+aiosqlite:///{path}"
    await asyncio.to_thread(command.downgrade, alembic_config(url), "0001")
    async with app_client(make_settings(url)) as http:
        response = await http.get("/readyz")
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "schema_not_current"
    assert "0001" in response.json()["detail"]


async def test_not_ready_when_the_database_does_not_answer(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'no-such-dir' / 'eventlog.db'}"
    async with app_client(make_settings(url)) as http:
        response = await http.get("/readyz")
        alive = await http.get("/healthz")
    assert response.status_code == 503
    assert response.json()["code"] == "database_unavailable"
    assert alive.status_code == 200  # alive, just not ready

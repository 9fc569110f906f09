"""The deployment the end-to-end tests run against: service and MCP server as processes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.support.running import eventlog_service, mcp_server


@dataclass(frozen=True)
class Deployment:
    """A running service and an MCP server storing its streams there."""

    eventlog: str
    mcp: str


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)],
)
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """The service (on the backend of the param) and the test MCP server, as processes."""
    workdir = tmp_path_factory.mktemp("e2e")
    if request.param == "sqlite":
        database_url = f"sqlite+aiosqlite:///{workdir / 'eventlog.db'}"
    else:
        database_url = request.getfixturevalue("postgres_database")
        anyio.run(_truncate, database_url)
    with eventlog_service(database_url, workdir) as eventlog, mcp_server(eventlog, workdir) as url:
        yield Deployment(eventlog, url)


async def _truncate(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("TRUNCATE streams, generations, events RESTART IDENTITY"))
    finally:
        await engine.dispose()

"""Helpers for the operator tests: configured keys, and one client per key on one app."""

from __future__ import annotations

import hashlib
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app import cli
from app.admin_cli import run_admin
from app.admin_client import AdminClient
from app.cli import _parser
from app.settings import KeySpec, Settings
from tests.support.app import make_settings, started_app

WRITER_A = "writer-key-of-tenant-a-0001"
WRITER_B = "writer-key-of-tenant-b-0002"
ADMIN = "admin-key-of-the-operators-0003"

KEYS = (
    KeySpec(scope="writer", tenant="a", key=WRITER_A),
    KeySpec(scope="writer", tenant="b", key=WRITER_B),
    # Configured by digest, as an operator who keeps secrets out of the environment would.
    KeySpec(scope="admin", tenant="ops", key_sha256=hashlib.sha256(ADMIN.encode()).hexdigest()),
)


def keyed_settings(database_url: str, **overrides: Any) -> Settings:
    """Settings with the three test keys."""
    return make_settings(database_url, keys=KEYS, **overrides)


@dataclass
class KeyedApp:
    """One running app, and a way to call it as any key (or none)."""

    app: FastAPI
    transport: httpx.AsyncBaseTransport
    clients: list[httpx.AsyncClient]

    def as_key(self, key: str | None) -> httpx.AsyncClient:
        """A client that sends `Authorization: Bearer <key>` (nothing for None)."""
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        client = httpx.AsyncClient(
            transport=self.transport, base_url="http://eventlog.test", headers=headers
        )
        self.clients.append(client)
        return client


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[KeyedApp]:
    """Start the app (lifespan included) and hand out clients per key."""
    async with started_app(settings) as (app, _client):
        keyed = KeyedApp(app, httpx.ASGITransport(app=app), [])
        try:
            yield keyed
        finally:
            for client in keyed.clients:
                await client.aclose()


async def ok(response: httpx.Response, status: int = 200) -> Any:
    """The JSON body, after checking the status."""
    assert response.status_code == status, response.text
    return response.json()


async def admin_cli(keyed: KeyedApp, *argv: str, key: str = ADMIN, expect: int = 0) -> str:
    """`mcp-eventlog admin --key KEY ARGV…` against the app in process: its output, once
    its exit code is checked to be `expect`."""
    args = _parser().parse_args(["admin", "--key", key, *argv])
    out = io.StringIO()
    transport = httpx.ASGITransport(app=keyed.app)
    async with AdminClient("http://eventlog.test", args.key, transport=transport) as client:
        code = await run_admin(args, client, out)
    assert code == expect
    return out.getvalue()


# The bodies of fixtures that several modules share (the admin API's, the keys' and those
# that drive `mcp-eventlog admin …` against an app); each module makes them its fixtures in
# a line (`pytest.fixture(keyed_app, name="keyed")`).
def leave_logging_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """`main` configures the process's logging; here that process is pytest's."""
    monkeypatch.setattr(cli, "configure_logging", lambda _settings: None)


async def keyed_app(database_url: str) -> AsyncIterator[KeyedApp]:
    """The app with the three test keys, running."""
    async with running_app(keyed_settings(database_url)) as app:
        yield app
